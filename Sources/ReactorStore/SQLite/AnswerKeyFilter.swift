internal import ConcurrencyPrimitives

/// The idempotency keys a SQLite file may hold: a Bloom filter of the keys found in the file
/// when it was opened and of every key kept since. The file has one writer, this process (its
/// `flock`), so a key the filter has not seen is certainly new and its lookup can be skipped: a
/// read on the reader connection, whose page cache every commit empties. A key it wrongly
/// answers "maybe" to is looked up as before, so the filter's fixed size (4 MiB, taken with the
/// first key) bounds its memory and a filter grown full costs only the lookups it saved.
final class AnswerKeyFilter: Sendable {
    private static let bitCount = 1 << 25
    private static let probes = 3

    private struct Bits {
        /// nil: no key yet.
        var words: [UInt64]?
        /// Every key of the file is in `words`: until then, every key may be held.
        var isComplete = false
    }
    private let bits = Locked(Bits())
    /// Set by `close`: the loading thread stops at its next batch.
    private let isClosed = Locked(false)
    private let loader = Locked<PlatformThread?>(nil)

    /// Whether `key` in `scope` may be kept in the file (false: certainly not).
    func mayHold(scope: String, key: String) -> Bool {
        let positions = Self.positions(scope, key)
        return bits.withLock { bits in
            guard bits.isComplete else { return true }
            return Self.holds(positions, bits.words)
        }
    }

    /// `key` in `scope` is being kept (before its transaction commits: a repeat can only come
    /// after that, and a transaction rolled back leaves a "maybe", which is only a lookup).
    /// Returns true when it was certainly not kept before.
    func add(scope: String, key: String) -> Bool {
        let positions = Self.positions(scope, key)
        return bits.withLock { bits in
            let wasNew = bits.isComplete && !Self.holds(positions, bits.words)
            Self.set(positions, in: &bits)
            return wasNew
        }
    }

    var isComplete: Bool { bits.withLock { $0.isComplete } }

    /// Adds the keys of the file at `path` on a thread of its own, then answers for it;
    /// keys kept meanwhile are added by `add` as usual. Failing, it leaves every key a "maybe".
    func load(from path: String) {
        let thread = try? PlatformThread.joinable { [self] in
            do {
                let connection = try SQLiteConnection(path: path, readOnly: true)
                try connection.execute("PRAGMA busy_timeout = 5000")
                let keys = try connection.statement("SELECT scope, key FROM answers INDEXED BY answers_by_key")
                var batch: [[Int]] = []
                while try keys.next() {
                    batch.append(Self.positions(keys.string(0), keys.string(1)))
                    guard batch.count == 4096 else { continue }
                    if isClosed.withLock({ $0 }) { return }
                    bits.withLock { bits in for positions in batch { Self.set(positions, in: &bits) } }
                    batch.removeAll(keepingCapacity: true)
                }
                bits.withLock { bits in
                    for positions in batch { Self.set(positions, in: &bits) }
                    bits.isComplete = true
                }
            } catch {
                // Every key stays a "maybe": looked up, as without the filter.
            }
        }
        loader.withLock { $0 = thread }
    }

    /// Stops the loading thread and waits for it.
    func close() {
        isClosed.withLock { $0 = true }
        loader.withLock { thread in
            thread?.join()
            thread = nil
        }
    }

    /// Whether every one of a key's bits is set (none is before the first key).
    private static func holds(_ positions: [Int], _ words: [UInt64]?) -> Bool {
        guard let words else { return false }
        return positions.allSatisfy { words[$0 >> 6] & (1 << ($0 & 63)) != 0 }
    }

    private static func set(_ positions: [Int], in bits: inout Bits) {
        if bits.words == nil { bits.words = [UInt64](repeating: 0, count: bitCount / 64) }
        for position in positions { bits.words![position >> 6] |= 1 << (position & 63) }
    }

    /// The bits of a key: double hashing of one 64-bit hash (seeded per process, as the
    /// filter lives only in memory).
    private static func positions(_ scope: String, _ key: String) -> [Int] {
        var hasher = Hasher()
        hasher.combine(scope)
        hasher.combine(key)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        let first = hash & 0xFFFF_FFFF
        let step = (hash >> 32) | 1
        return (0..<UInt64(probes)).map { Int((first &+ $0 &* step) & UInt64(bitCount - 1)) }
    }
}
