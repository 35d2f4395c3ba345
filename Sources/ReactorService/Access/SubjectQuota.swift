/// Sessions in memory per subject, and places reserved for ones being made: what
/// `--max-sessions-per-subject` limits. A subject with none leaves the table.
final class SubjectQuota: Sendable {
    let limit: Int
    private let counts = Locked<[String: (live: Int, pending: Int)]>([:])

    init(limit: Int) { self.limit = limit }

    /// Reserves a place for one more session of `subject`; false when it has `limit` already.
    func reserve(_ subject: String) -> Bool {
        counts.withLock { counts in
            let count = counts[subject] ?? (0, 0)
            guard count.live + count.pending < limit else { return false }
            counts[subject] = (count.live, count.pending + 1)
            return true
        }
    }

    func release(pending subject: String) { change(subject, live: 0, pending: -1) }
    func opened(_ subject: String) { change(subject, live: 1, pending: 0) }
    func closed(_ subject: String) { change(subject, live: -1, pending: 0) }

    func count(_ subject: String) -> Int { counts.withLock { $0[subject].map { $0.live + $0.pending } ?? 0 } }

    private func change(_ subject: String, live: Int, pending: Int) {
        counts.withLock { counts in
            let count = counts[subject] ?? (0, 0)
            let next = (live: max(0, count.live + live), pending: max(0, count.pending + pending))
            counts[subject] = next.live == 0 && next.pending == 0 ? nil : next
        }
    }
}
