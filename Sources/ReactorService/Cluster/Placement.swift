import ConcurrencyPrimitives

/// Where a session should live: on the node its requests reach. A balancer that hashes on the
/// session id (deploy/cluster/nginx.conf) sends all of a session's requests to one node; while
/// another node holds the session, each of them is forwarded. So the holder counts the forwarded
/// actions in a row that one node sent it, and past `threshold` hands the session over: it
/// leaves memory once nothing runs for it (no running effect, everything written; its streams
/// here close, to resume where the balancer sends them, at most once in `streamClosingInterval`,
/// else once it has none), its lease goes back, and that node takes it on its next request. An
/// action that reaches the holder directly ends the streak: under a round-robin balancer, whose
/// requests come from every node, sessions stay put. Correctness never depends on it: any node
/// serves any session.
final class Placement: Sendable {
    let threshold: Int
    /// How long after a hand-over that closed a session's streams another may not: a client that
    /// follows the session on this node directly, not through the balancer, comes back here and
    /// takes it back, and its stream would close at every hand-over.
    let streamClosingInterval: Double
    /// By session: the node whose forwarded requests came last, and how many in a row.
    private let streaks = Locked<[SessionKey: (node: String, count: Int)]>([:])
    /// By session: when a hand-over last closed its streams here.
    private let closings = Locked<[SessionKey: Double]>([:])

    init(threshold: Int = 8, streamClosingInterval: Double = 300) {
        self.threshold = threshold
        self.streamClosingInterval = streamClosingInterval
    }

    /// Whether a hand-over of `key` now may close its streams here.
    func mayCloseStreams(of key: SessionKey, now: Double) -> Bool {
        closings.withLock { closings in
            guard let last = closings[key] else { return true }
            return now - last >= streamClosingInterval
        }
    }

    /// A hand-over of `key` closed its streams here at `now`.
    func didCloseStreams(of key: SessionKey, now: Double) {
        closings.withLock { closings in
            if closings.count >= 100_000 { closings = closings.filter { now - $0.value < streamClosingInterval } }
            if closings.count < 100_000 { closings[key] = now }
        }
    }

    /// A request for `key` reached this node, forwarded by the node `origin` (nil: from a client
    /// or a balancer): true when the session should go to that node now.
    func note(_ key: SessionKey, forwardedBy origin: String?) -> Bool {
        streaks.withLock { streaks in
            guard let origin else {
                streaks[key] = nil
                return false
            }
            if streaks.count >= 100_000 { streaks.removeAll() }  // bounded; streaks start again
            var streak = streaks[key] ?? (origin, 0)
            if streak.node != origin { streak = (origin, 0) }
            streak.count += 1
            guard streak.count < threshold else {
                streaks[key] = nil
                return true
            }
            streaks[key] = streak
            return false
        }
    }
}
