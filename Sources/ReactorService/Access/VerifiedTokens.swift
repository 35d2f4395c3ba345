import ConcurrencyPrimitives

/// Tokens whose signature and claims verified, by their bytes (a token only canonically
/// equivalent to one verified was never verified itself), so a client that sends the same
/// token with every request pays for its verification once (parsing and checking a token cost
/// an HS256 server about two thirds of its action throughput). A hit repeats the time checks
/// only (`exp`, `nbf`, `iat`): the rest cannot change for the same bytes. Sharded by the
/// token's hash (no one lock on the request path), each shard bounded: when full, its expired
/// entries go, and if that frees nothing, all of them.
final class VerifiedTokens: Sendable {
    private static let shardCount = 16
    private let shards: [Locked<[Bytewise<Substring>: Principal]>]
    private let perShard: Int

    init(capacity: Int = 16_384) {
        shards = (0..<Self.shardCount).map { _ in Locked([:]) }
        perShard = max(1, capacity / Self.shardCount)
    }

    func principal(for token: Substring) -> Principal? {
        shard(token).withLock { $0[Bytewise(token)] }
    }

    func insert(_ principal: Principal, for token: Substring, now: Double) {
        // Its own copy of the token's bytes: the request's string may be large and short-lived.
        let key = Bytewise(Substring(String(token)))
        shard(token).withLock { entries in
            if entries.count >= perShard {
                entries = entries.filter { _, principal in (principal.claims["exp"]?.number ?? 0) >= now }
                if entries.count >= perShard { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = principal
        }
    }

    private func shard(_ token: Substring) -> Locked<[Bytewise<Substring>: Principal]> {
        shards[Int(UInt(bitPattern: Bytewise(token).hashValue) % UInt(Self.shardCount))]
    }
}
