/// A session id is the capability to use the session: 128 bits from the system's
/// cryptographic generator, written URL-safe (base64url, no padding, 22 characters).
enum SessionID {
    static func make() -> SessionKey {
        var generator = SystemRandomNumberGenerator()
        return SessionKey(high: generator.next(), low: generator.next())
    }

    /// Rejects what no issued id can be, before any lookup.
    static func isWellFormed(_ id: String) -> Bool {
        id.utf8.count == 22 && id.utf8.allSatisfy(Base64URL.isAlphabet)
    }
}

/// A session id as its 128 bits: what the store is keyed by and what a session keeps, so that
/// no session carries a heap-allocated 22-character String (64 bytes of RSS each). The text
/// form is written when a response needs it.
struct SessionKey: Hashable, Sendable {
    let high: UInt64
    let low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The key of an id as issued: 22 base64url characters whose last one carries only the
    /// 2 remaining bits (its low 4 bits zero). Anything else was never issued: nil.
    init?(_ id: String) {
        guard id.utf8.count == 22 else { return nil }
        var id = id
        // On the contiguous bytes: walking `utf8` byte by byte cost ~50 instructions a character.
        guard let key = id.withUTF8({ Self.decode($0) }) else { return nil }
        self = key
    }

    private static func decode(_ text: UnsafeBufferPointer<UInt8>) -> SessionKey? {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<22 {
            guard let value = Base64URL.value(of: text[index]) else { return nil }
            let sextet = UInt64(value)
            if index < 10 {
                high = high << 6 | sextet  // bits 0..59 of the 128
            } else if index == 10 {
                high = high << 4 | sextet >> 2  // bits 60..63
                low = sextet & 0x3  // bits 64..65
            } else if index < 21 {
                low = low << 6 | sextet  // bits 66..125
            } else {
                guard sextet & 0xF == 0 else { return nil }
                low = low << 2 | sextet >> 4  // bits 126..127
            }
        }
        return SessionKey(high: high, low: low)
    }

    /// The 22-character base64url text.
    var string: String {
        String(unsafeUninitializedCapacity: 22) { buffer in
            write(into: buffer)
            return 22
        }
    }

    /// Appends the text to `out` (no String in between: an answer writes the id straight in).
    func append(to out: inout [UInt8]) {
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: 22))
        out.withUnsafeMutableBufferPointer { write(into: UnsafeMutableBufferPointer(rebasing: $0[start..<start + 22])) }
    }

    private func write(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        var index = 0
        func put(_ sextet: UInt64) {
            buffer[index] = Base64URL.character(Int(sextet & 0x3F))
            index += 1
        }
        for shift in stride(from: 58, through: 4, by: -6) { put(high >> UInt64(shift)) }
        put((high & 0xF) << 2 | low >> 62)
        for shift in stride(from: 56, through: 2, by: -6) { put(low >> UInt64(shift)) }
        put((low & 0x3) << 4)
    }
}

enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func character(_ value: Int) -> UInt8 { alphabet[value] }

    static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    static func isAlphabet(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }

    static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var word: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { word |= UInt32(byte) << (16 - 8 * offset) }
            let characters = chunk.count + 1
            for position in 0..<characters {
                out.append(alphabet[Int((word >> (18 - 6 * position)) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}
