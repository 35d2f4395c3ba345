import ConcurrencyPrimitives
import Dispatch

/// A token bucket per client address for `POST /sessions` without authentication
/// (`--session-create-rate`, `--session-create-burst`): one client cannot fill the session table.
/// Buckets that have refilled are dropped once the table grows, so it stays as small as the set
/// of clients creating sessions now.
final class CreationRateLimit: Sendable {
    let rate: Double
    let burst: Double
    private let buckets = Locked<(byPeer: [String: (tokens: Double, at: UInt64)], pruneAt: Int)>(([:], 10_000))

    init(rate: Double, burst: Int) {
        self.rate = rate
        self.burst = Double(max(1, burst))
    }

    var describe: String { "\(Self.format(rate)) per second (bursts of \(Int(burst)))" }

    /// nil when `peer` may create a session now (a token is taken); else whole seconds until it may.
    func take(_ peer: String) -> Int? {
        let now = DispatchTime.now().uptimeNanoseconds
        return buckets.withLock { state -> Int? in
            var bucket = state.byPeer[peer] ?? (burst, now)
            bucket.tokens = min(burst, bucket.tokens + Double(now &- bucket.at) / 1e9 * rate)
            bucket.at = now
            defer {
                state.byPeer[peer] = bucket
                if state.byPeer.count > state.pruneAt { prune(&state, now: now) }
            }
            // Bounded: a tiny rate (1e-20 a second) would make a wait past Int, which traps.
            guard bucket.tokens >= 1 else { return max(1, Int(min(((1 - bucket.tokens) / rate).rounded(.up), 1e9))) }
            bucket.tokens -= 1
            return nil
        }
    }

    /// Returns a token `take` gave for a session that was not made.
    func giveBack(_ peer: String) {
        buckets.withLock { state in
            if let bucket = state.byPeer[peer] { state.byPeer[peer] = (min(burst, bucket.tokens + 1), bucket.at) }
        }
    }

    private func prune(_ state: inout (byPeer: [String: (tokens: Double, at: UInt64)], pruneAt: Int), now: UInt64) {
        state.byPeer = state.byPeer.filter { _, bucket in
            bucket.tokens + Double(now &- bucket.at) / 1e9 * rate < burst
        }
        state.pruneAt = max(10_000, state.byPeer.count * 2)
    }

    private static func format(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
