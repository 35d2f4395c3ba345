#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A string compared and hashed by its UTF-8 bytes. `String`'s `==` and hash follow Unicode
/// canonical equivalence ("é" as U+00E9 equals "e" + U+0301, "Å" as U+212B equals U+00C5), but
/// subjects are compared without normalizing them (RFC 7519 §7.3): sessions' owners, quotas,
/// idempotency scopes, and the tokens that carry them.
struct Bytewise<Text: StringProtocol & Sendable>: Hashable, Sendable {
    let text: Text

    init(_ text: Text) { self.text = text }

    static func == (a: Self, b: Self) -> Bool {
        let (x, y) = (a.text.utf8, b.text.utf8)
        // The bytes in place, compared at once: the ledger's table compares keys on every find.
        let compared = x.withContiguousStorageIfAvailable { p in
            y.withContiguousStorageIfAvailable { q in
                p.count == q.count && (p.isEmpty || memcmp(p.baseAddress!, q.baseAddress!, p.count) == 0)
            }
        }
        if let compared, let compared { return compared }
        return x.elementsEqual(y)
    }

    func hash(into hasher: inout Hasher) {
        let utf8 = text.utf8
        hasher.combine(utf8.count)  // so that two fields hashed in a row hash apart
        let hashed: Void? = utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if hashed == nil { for byte in utf8 { hasher.combine(byte) } }
    }
}
