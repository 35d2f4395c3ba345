import ConcurrencyPrimitives
import ReactorStore

/// Sessions per subject, and places reserved for ones being made: what
/// `--max-sessions-per-subject` limits. With the memory store the sessions are counted here as
/// they open and end; a durable store counts them itself (`reserve`'s `stored`), since they
/// outlive memory. A subject with none leaves the table. Subjects are told apart byte for byte.
final class SubjectQuota: Sendable {
    let limit: Int
    private let counts = Locked<[Bytewise<String>: (live: Int, pending: Int)]>([:])

    init(limit: Int) { self.limit = limit }

    /// Reserves a place for one more session of `subject`; false when it has `limit` already.
    /// `stored`: its sessions as a durable store counts them, instead of those counted here; read
    /// under this table's lock, which a creation's `release(pending:)` (after its commit) takes too,
    /// so that no creation is counted neither as pending nor as stored.
    func reserve(_ subject: String, stored: ((String) -> Result<Int, StoreError>)? = nil) throws(StoreError) -> Bool {
        let key = Bytewise(subject)
        let outcome: Result<Bool, StoreError> = counts.withLock { counts in
            let count = counts[key] ?? (0, 0)
            var held = count.live
            if let stored {
                switch stored(subject) {
                case let .success(found): held = found
                case let .failure(error): return .failure(error)
                }
            }
            guard held + count.pending < limit else { return .success(false) }
            counts[key] = (count.live, count.pending + 1)
            return .success(true)
        }
        return try outcome.get()
    }

    func release(pending subject: String) { change(subject, live: 0, pending: -1) }
    func opened(_ subject: String) { change(subject, live: 1, pending: 0) }
    func closed(_ subject: String) { change(subject, live: -1, pending: 0) }

    func count(_ subject: String) -> Int { counts.withLock { $0[Bytewise(subject)].map { $0.live + $0.pending } ?? 0 } }

    private func change(_ subject: String, live: Int, pending: Int) {
        let key = Bytewise(subject)
        counts.withLock { counts in
            let count = counts[key] ?? (0, 0)
            let next = (live: max(0, count.live + live), pending: max(0, count.pending + pending))
            counts[key] = next.live == 0 && next.pending == 0 ? nil : next
        }
    }
}
