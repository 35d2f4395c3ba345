import ConcurrencyPrimitives
import MicroHTTP

/// The service's metrics, in this server's own `MetricsRegistry` (not a process-wide
/// bootstrap, so two servers in one process don't mix), every family with `# HELP` and
/// `# TYPE`. No label carries a session id.
///
/// - `reactord_sessions` (loaded in memory), `reactord_subscribers`: totals, kept as they change.
/// - With a durable store: `reactord_sessions_stored` (read when /metrics is), the loads from the
///   store and their duration, and the unloads `{reason}` (idle, memory).
/// - `reactord_reactor_sessions{reactor}`, `reactord_reactor_subscribers{reactor}`: by kind,
///   counted from the session table when /metrics is read (nothing on the hot paths).
/// - `reactord_actions_total{reactor,outcome}`: applied, or why not (then `reactor="unknown"`).
/// - `reactord_http_requests_total` and `reactord_http_request_duration_seconds`
///   `{method,route,status_class}`: every routed request, by route pattern.
/// - `reactord_auth_failures_total{reason}`: requests refused for their credentials (401: missing,
///   malformed, algorithm, signature, expired, not_yet_valid, issuer, audience, claims; 403:
///   forbidden, not_admin). No label carries a token or a subject.
/// - `reactord_limited_total{limit}`: 429s, by the limit that answered (sessions_per_subject,
///   session_create_rate).
/// - `process_*`: resident and virtual memory, open and max fds, CPU seconds, start time.
final class ServiceMetrics: Sendable {
    let registry = MetricsRegistry()
    let sessions: Gauge
    let subscribers: Gauge
    let eventsDelivered: Counter
    let slowConsumersDropped: Counter
    let storedSessions: Gauge
    let loads: Counter
    let loadSeconds: DurationHistogram
    let idleUnloads: Counter
    let memoryUnloads: Counter
    private let process: ProcessMetrics

    init() {
        sessions = registry.makeGauge(name: "reactord_sessions", help: "Sessions loaded in memory now.")
        storedSessions = registry.makeGauge(
            name: "reactord_sessions_stored",
            help: "Sessions in the durable store, loaded or not (0 with the memory store).")
        loads = registry.makeCounter(
            name: "reactord_session_loads_total", help: "Sessions loaded from the durable store.")
        loadSeconds = registry.makeDurationHistogram(
            name: "reactord_session_load_duration_seconds",
            help: "Time to load a session from the durable store.",
            buckets: Self.durationBuckets)
        let unloads = "Sessions unloaded from memory (still stored), by why: idle past --unload-after, or to make room."
        idleUnloads = registry.makeCounter(
            name: "reactord_session_unloads_total", help: unloads, labels: [("reason", "idle")])
        memoryUnloads = registry.makeCounter(
            name: "reactord_session_unloads_total", help: unloads, labels: [("reason", "memory")])
        subscribers = registry.makeGauge(name: "reactord_subscribers", help: "Event-stream subscribers connected now.")
        eventsDelivered = registry.makeCounter(
            name: "reactord_events_delivered_total",
            help:
                "Live events queued on subscriber streams, one per stream (a stream's first state, resumed events and ends are not counted)."
        )
        slowConsumersDropped = registry.makeCounter(
            name: "reactord_slow_consumers_dropped_total",
            help: "Event streams closed because their client read too slowly (queue over its limit).")
        process = ProcessMetrics(registry: registry)
        sessions.set(0)
        subscribers.set(0)
    }

    // MARK: actions

    enum ActionOutcome: String, CaseIterable {
        case applied, malformed, invalid, unknownSession = "unknown_session", tooLarge = "too_large", unavailable
        case refused, preconditionFailed = "precondition_failed"
    }

    /// By kind, then by outcome (its index in `ActionOutcome.allCases`); made on first use.
    private let actionCounters = Locked<[String: [Counter?]]>([:])
    private static let outcomes = ActionOutcome.allCases

    /// Counts one action of `kind` (a session's reactor kind; "unknown" when no session was found).
    /// On the action path: one uncontended lock and a dictionary lookup, no allocation.
    func countAction(kind: String, outcome: ActionOutcome) {
        let index = Self.outcomes.firstIndex(of: outcome)!
        let counter = actionCounters.withLock { counters -> Counter in
            if let counter = counters[kind]?[index] { return counter }
            let counter = registry.makeCounter(
                name: "reactord_actions_total",
                help: "Actions received, by reactor kind and outcome (applied, or why not).",
                labels: [("reactor", kind), ("outcome", outcome.rawValue)])
            counters[kind, default: Array(repeating: nil, count: Self.outcomes.count)][index] = counter
            return counter
        }
        counter.increment()
    }

    /// An answer MicroHTTP gave before any route ran (413 over the body limit, 400 for bad
    /// framing, 503 at the connection limit or while stopping): a POST /action refused so is
    /// an action that did not apply, from no session found.
    func countRefusal(method: HTTPMethod, path: String, status: Int) {
        let isAction = path == "/action" || (path.hasPrefix("/sessions/") && path.hasSuffix("/actions"))
        guard method == .POST, isAction, let outcome = Self.actionOutcome(status: status) else { return }
        countAction(kind: "unknown", outcome: outcome)
    }

    /// The outcome of a POST /action that did not apply, from its status.
    static func actionOutcome(status: Int) -> ActionOutcome? {
        switch status {
        case 200..<300: return nil
        case 400, 415: return .malformed
        case 401, 403: return .refused
        case 404: return .unknownSession
        case 412: return .preconditionFailed
        case 413: return .tooLarge
        case 422: return .invalid
        default: return .unavailable
        }
    }

    // MARK: access

    private let accessCounters = Locked<[String: Counter]>([:])

    /// One request refused for its credentials, by reason (a fixed set: see the type's comment).
    func countAuthFailure(_ reason: String) {
        counter("reactord_auth_failures_total", "Requests refused for their credentials, by reason.", "reason", reason)
            .increment()
    }

    /// One 429, by the limit that answered it.
    func countLimited(_ limit: String) {
        counter(
            "reactord_limited_total",
            "Requests refused by a limit (429 by a creation limit, 503 past the action-log reads at once), by limit.",
            "limit", limit
        )
        .increment()
    }

    private func counter(_ name: String, _ help: String, _ label: String, _ value: String) -> Counter {
        accessCounters.withLock { counters in
            if let counter = counters[name + "\u{0}" + value] { return counter }
            let counter = registry.makeCounter(name: name, help: help, labels: [(label, value)])
            counters[name + "\u{0}" + value] = counter
            return counter
        }
    }

    // MARK: requests

    /// The request metrics of one route and method: a counter and a histogram per status
    /// class, made when that class is first answered (a route that never failed shows no 5xx
    /// series, and /metrics stays small).
    final class RouteMetrics: Sendable {
        private let registry: MetricsRegistry
        private let method: String
        private let route: String
        private let byClass = Locked<[(count: Counter, duration: DurationHistogram)?]>(Array(repeating: nil, count: 5))

        fileprivate init(registry: MetricsRegistry, method: String, route: String) {
            self.registry = registry
            self.method = method
            self.route = route
        }

        func record(status: Int, nanoseconds: UInt64) {
            let index = min(max(status / 100, 1), 5) - 1
            let metrics = byClass.withLock { byClass in
                if let made = byClass[index] { return made }
                let labels = [("method", method), ("route", route), ("status_class", "\(index + 1)xx")]
                let made = (
                    count: registry.makeCounter(
                        name: "reactord_http_requests_total",
                        help: "HTTP requests answered, by method, route pattern and status class.", labels: labels),
                    duration: registry.makeDurationHistogram(
                        name: "reactord_http_request_duration_seconds",
                        help: "Time the handler took to answer, by method, route pattern and status class.",
                        labels: labels, buckets: ServiceMetrics.durationBuckets)
                )
                byClass[index] = made
                return made
            }
            metrics.count.increment()
            metrics.duration.recordNanoseconds(Int64(clamping: nanoseconds))
        }
    }

    static let durationBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
        .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5),
    ]

    func routeMetrics(method: String, route: String) -> RouteMetrics {
        RouteMetrics(registry: registry, method: method, route: route)
    }

    // MARK: by reactor kind

    private let kindGauges = Locked<[String: (sessions: Gauge, subscribers: Gauge)]>([:])

    /// Sets the per-kind gauges from a count of the session table; kinds with no session left
    /// read 0 (every registered kind appears, so a dashboard sees zeros, not gaps).
    func setCensus(_ census: [String: (sessions: Int, subscribers: Int)], kinds: [String]) {
        kindGauges.withLock { gauges in
            for kind in Set(kinds).union(census.keys).sorted() {
                let pair =
                    gauges[kind] ?? (
                        registry.makeGauge(
                            name: "reactord_reactor_sessions", help: "Sessions open now, by reactor kind.",
                            labels: [("reactor", kind)]),
                        registry.makeGauge(
                            name: "reactord_reactor_subscribers",
                            help: "Event-stream subscribers connected now, by reactor kind.",
                            labels: [("reactor", kind)])
                    )
                gauges[kind] = pair
                let counts = census[kind] ?? (0, 0)
                pair.sessions.set(Double(counts.sessions))
                pair.subscribers.set(Double(counts.subscribers))
            }
        }
    }

    /// Prometheus text exposition format, the process metrics read now.
    func exposition() -> [UInt8] {
        process.update()
        return registry.emitToBuffer()
    }
}
