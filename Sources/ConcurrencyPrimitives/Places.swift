/// So many places, taken and given back from any thread: what bounds the sessions in memory,
/// or the reads that may run at once.
package final class Places: Sendable {
    package let capacity: Int
    private let count = Locked(0)

    package init(capacity: Int) { self.capacity = capacity }

    /// The places taken now.
    package var taken: Int { count.current }

    /// Takes one; false when every place is taken.
    package func take() -> Bool {
        count.withLock { count in
            guard count < capacity else { return false }
            count += 1
            return true
        }
    }

    /// Gives back `places` taken with `take()`.
    package func giveBack(_ places: Int = 1) { count.withLock { $0 -= places } }
}
