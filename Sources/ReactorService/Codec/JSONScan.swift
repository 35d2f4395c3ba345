/// Moving over JSON text as sent, for the codecs that read a body's bytes rather than decode it
/// (an idempotency key's digest, the action log's redaction): whitespace, one value whole, and a
/// string's escapes (the request decoder's too).
enum JSONScan {
    /// A member's name as the decoder reads it, from its quoted text: `"pass\u0077ord"` is `password`.
    static func memberName(_ quoted: ArraySlice<UInt8>) -> String {
        guard quoted.count >= 2 else { return "" }
        let text = quoted.dropFirst().dropLast()
        guard text.contains(UInt8(ascii: "\\")) else { return String(decoding: text, as: UTF8.self) }
        return text.withUnsafeBufferPointer(unescaped) ?? ""
    }

    /// The text without the UTF-8 byte order mark a body may start with (the decoders allow it).
    static func withoutByteOrderMark(_ json: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        json.starts(with: [0xEF, 0xBB, 0xBF]) ? json.dropFirst(3) : json
    }

    static func isSpace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    /// Moves `index` past whitespace.
    static func skipSpace(_ json: ArraySlice<UInt8>, _ index: inout Int) {
        while index < json.endIndex, isSpace(json[index]) { index += 1 }
    }

    /// Moves `index` past the one value that starts there (a string, a container with all it
    /// holds, or a scalar, which ends at the next delimiter); false when the text ends first or
    /// a container closes that was not opened.
    static func skipValue(_ json: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        var depth = 0
        while index < json.endIndex {
            let byte = json[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard skipString(json, &index) else { return false }
                if depth == 0 { return true }
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                if depth == 0 { return true }
                if depth < 0 { return false }
            case UInt8(ascii: ","):
                if depth == 0 {
                    index -= 1
                    return true
                }
            default:
                if depth == 0, index < json.endIndex, isDelimiter(json[index]) { return true }
            }
        }
        return depth == 0
    }

    /// Moves `index`, just past a string's opening quote, past its closing one (escapes
    /// honoured); false when the text ends first, with `index` at its end.
    static func skipString(_ json: ArraySlice<UInt8>, _ index: inout Int) -> Bool {
        var escaped = false
        while index < json.endIndex {
            let byte = json[index]
            index += 1
            if escaped {
                escaped = false
            } else if byte == UInt8(ascii: "\\") {
                escaped = true
            } else if byte == UInt8(ascii: "\"") {
                return true
            }
        }
        return false
    }

    /// What ends a scalar.
    private static func isDelimiter(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: ",") || byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") || isSpace(byte)
    }

    /// A JSON string's text between its quotes, its escapes decoded; nil when one is invalid.
    static func unescaped(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = 0
        while i < raw.count {
            let byte = raw[i]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            guard i + 1 < raw.count else { return nil }
            let escape = raw[i + 1]
            i += 2
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard let unit = hex4(raw, at: i) else { return nil }
                i += 4
                var scalarValue = UInt32(unit)
                if (0xD800...0xDBFF).contains(unit) {
                    guard i + 6 <= raw.count, raw[i] == UInt8(ascii: "\\"), raw[i + 1] == UInt8(ascii: "u"),
                        let low = hex4(raw, at: i + 2), (0xDC00...0xDFFF).contains(low)
                    else { return nil }
                    i += 6
                    scalarValue = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(unit) {
                    return nil
                }
                guard let scalar = Unicode.Scalar(scalarValue) else { return nil }
                out.append(contentsOf: String(Character(scalar)).utf8)
            default:
                return nil
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hex4(_ raw: UnsafeBufferPointer<UInt8>, at start: Int) -> UInt16? {
        guard start + 4 <= raw.count else { return nil }
        var value: UInt16 = 0
        for offset in 0..<4 {
            let byte = raw[start + offset]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: return nil
            }
            value = value << 4 | UInt16(digit)
        }
        return value
    }
}
