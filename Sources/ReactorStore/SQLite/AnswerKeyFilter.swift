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
        let hash = Self.hash(scope, key)
        return bits.withLock { bits in
            guard bits.isComplete else { return true }
            return Self.holds(hash, bits.words)
        }
    }

    /// `key` in `scope` is being kept (before its transaction commits: a repeat can only come
    /// after that, and a transaction rolled back leaves a "maybe", which is only a lookup).
    /// Returns true when it was certainly not kept before.
    func add(scope: String, key: String) -> Bool {
        let hash = Self.hash(scope, key)
        return bits.withLock { bits in
            let wasNew = bits.isComplete && !Self.holds(hash, bits.words)
            Self.set(hash, in: &bits)
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
                var batch: [UInt64] = []
                while try keys.next() {
                    batch.append(Self.hash(keys.string(0), keys.string(1)))
                    guard batch.count == 4096 else { continue }
                    if isClosed.withLock({ $0 }) { return }
                    bits.withLock { bits in for hash in batch { Self.set(hash, in: &bits) } }
                    batch.removeAll(keepingCapacity: true)
                }
                bits.withLock { bits in
                    for hash in batch { Self.set(hash, in: &bits) }
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
    private static func holds(_ hash: UInt64, _ words: [UInt64]?) -> Bool {
        guard let words else { return false }
        for probe in 0..<probes {
            let bit = position(hash, probe)
            if words[bit >> 6] & (1 << (bit & 63)) == 0 { return false }
        }
        return true
    }

    private static func set(_ hash: UInt64, in bits: inout Bits) {
        if bits.words == nil { bits.words = [UInt64](repeating: 0, count: bitCount / 64) }
        for probe in 0..<probes {
            let bit = position(hash, probe)
            bits.words![bit >> 6] |= 1 << (bit & 63)
        }
    }

    /// A key's `probe`th bit: double hashing of its one 64-bit hash.
    private static func position(_ hash: UInt64, _ probe: Int) -> Int {
        Int(((hash & 0xFFFF_FFFF) &+ UInt64(probe) &* ((hash >> 32) | 1)) & UInt64(bitCount - 1))
    }

    /// FNV-1a over the scope, a zero byte and the key, spread by Murmur3's finalizer. Seeded per
    /// process, as the filter lives only in memory (keys made to collide cost only the lookups the
    /// filter would have saved).
    private static func hash(_ scope: String, _ key: String) -> UInt64 {
        var hash = seed
        fnv(scope, into: &hash)
        hash = hash &* 0x100_0000_01b3  // the zero byte between them
        fnv(key, into: &hash)
        hash = (hash ^ (hash >> 33)) &* 0xff51_afd7_ed55_8ccd
        hash = (hash ^ (hash >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        return hash ^ (hash >> 33)
    }

    /// On the bytes in place where the string has them (an index walk of `utf8` costs ~20
    /// instructions a byte).
    private static func fnv(_ text: String, into hash: inout UInt64) {
        let step = { (hash: inout UInt64, byte: UInt8) in hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        let done: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            for byte in bytes { step(&hash, byte) }
        }
        if done == nil { for byte in text.utf8 { step(&hash, byte) } }
    }

    private static let seed = 0xcbf2_9ce4_8422_2325 ^ UInt64.random(in: 0...UInt64.max)
}
