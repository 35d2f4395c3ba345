/// `package`: ReactorServiceCLI trims flag values with it too.
extension StringProtocol {
    /// Without leading and trailing spaces and tabs (what `trimmingCharacters(in: .whitespaces)`
    /// did, without needing all of Foundation).
    package func trimmingWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isWhitespace && !$0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return "" }
        let last = lastIndex(where: { !isSpace($0) })!
        return String(self[first...last])
    }
}

extension Substring {
    /// Without the optional whitespace around it (RFC 9110's OWS: spaces and tabs), which is not
    /// part of a field's value; libmicrohttpd strips only what comes before it.
    func trimmingSpaceAndTab() -> Substring {
        let isSpaceOrTab = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var utf8 = self.utf8
        while let first = utf8.first, isSpaceOrTab(first) { utf8 = utf8.dropFirst() }
        while let last = utf8.last, isSpaceOrTab(last) { utf8 = utf8.dropLast() }
        return Substring(utf8)
    }
}
