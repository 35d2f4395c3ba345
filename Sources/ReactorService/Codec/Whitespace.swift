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
        var text = self
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }
}
