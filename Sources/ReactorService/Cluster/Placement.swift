import ConcurrencyPrimitives

/// Where a session should live: on the node its requests reach. A balancer that hashes on the
/// session id (deploy/cluster/nginx.conf) sends all of a session's requests to one node; while
/// another node holds the session, each of them is forwarded. So the holder counts the forwarded
/// actions in a row that one node sent it, and past `threshold` hands the session over: it
/// leaves memory once nothing runs for it (no running effect, everything written; its streams
/// here close, to resume where the balancer sends them), its lease goes back, and that node
/// takes it on its next request. An action that reaches the holder
/// directly ends the streak: under a round-robin balancer, whose requests come from every node,
/// sessions stay put. Correctness never depends on it: any node serves any session.
final class Placement: Sendable {
    let threshold: Int
    /// By session: the node whose forwarded requests came last, and how many in a row.
    private let streaks = Locked<[SessionKey: (node: String, count: Int)]>([:])

    init(threshold: Int = 8) { self.threshold = threshold }

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
