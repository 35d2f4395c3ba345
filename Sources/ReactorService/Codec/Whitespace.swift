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
