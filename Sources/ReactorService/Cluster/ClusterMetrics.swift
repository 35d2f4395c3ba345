/// Cluster mode's figures, per node, in the service's registry (made only in cluster mode).
///
/// - `reactord_cluster_sessions_held`: sessions whose lease this node holds.
/// - `reactord_cluster_forwarded_total{outcome}`: requests sent on to a session's holder
///   (`answered`, `unreachable` (503), `unknown` (504)).
/// - `reactord_cluster_takeovers_total`: sessions this node took from the store (free, or
///   their holder's lease had passed).
/// - `reactord_cluster_leases_lost_total`, `reactord_cluster_lease_renew_failures_total`.
/// - `reactord_cluster_handovers_total`: sessions this node gave to the node their requests reach.
/// - `reactord_cluster_notify_lag_seconds`: from a holder's commit to this node reading the events.
/// - `reactord_cluster_follower_updates_total{source}`: new events of sessions held elsewhere
///   published to this node's subscribers: one commit's, carried by its notification
///   (`notification`), or all those a read from the table found (`table`).
final class ClusterMetrics: Sendable {
    let sessionsHeld: Gauge
    let takeovers: Counter
    let leasesLost: Counter
    let renewFailures: Counter
    let handovers: Counter
    let notifyLag: DurationHistogram
    let followedFromNotification: Counter
    let followedFromTable: Counter
    private let forwarded: [Counter]

    enum ForwardOutcome: Int { case answered, unreachable, unknown }

    init(registry: MetricsRegistry) {
        sessionsHeld = registry.makeGauge(
            name: "reactord_cluster_sessions_held",
            help: "Sessions whose lease this node holds, as of its last lease renewal (at most a second ago).")
        takeovers = registry.makeCounter(
            name: "reactord_cluster_takeovers_total",
            help: "Sessions this node took from the store: free, or their holder's lease had passed.")
        leasesLost = registry.makeCounter(
            name: "reactord_cluster_leases_lost_total",
            help: "Sessions this node held and lost to another node (its lease ran out while it was frozen or cut off)."
        )
        renewFailures = registry.makeCounter(
            name: "reactord_cluster_lease_renew_failures_total",
            help: "Lease renewals that failed because the database did not answer.")
        handovers = registry.makeCounter(
            name: "reactord_cluster_handovers_total",
            help: "Sessions this node gave back for the node their requests reach to take (see Placement).")
        notifyLag = registry.makeDurationHistogram(
            name: "reactord_cluster_notify_lag_seconds",
            help: "Time from a holder's commit to this node reading the events for its subscribers.",
            buckets: ServiceMetrics.durationBuckets)
        let followed =
            "Updates of sessions held elsewhere published to subscribers here, by where their events came from."
        followedFromNotification = registry.makeCounter(
            name: "reactord_cluster_follower_updates_total", help: followed,
            labels: [("source", "notification")])
        followedFromTable = registry.makeCounter(
            name: "reactord_cluster_follower_updates_total", help: followed,
            labels: [("source", "table")])
        forwarded = ["answered", "unreachable", "unknown"].map { outcome in
            registry.makeCounter(
                name: "reactord_cluster_forwarded_total",
                help: "Requests sent on to the node holding their session, by outcome.",
                labels: [("outcome", outcome)])
        }
        sessionsHeld.set(0)
    }

    func countForward(_ outcome: ForwardOutcome) { forwarded[outcome.rawValue].increment() }
}
