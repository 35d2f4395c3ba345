/// The text exposition format's escaping and numbers (Prometheus format 0.0.4).
enum ExpositionText {
    /// `a="x",b="y"` in the order given, values escaped; no braces.
    static func labels(_ labels: [(String, String)]) -> String {
        labels.map { name, value in "\(name)=\"\(escape(value, quotes: true))\"" }.joined(separator: ",")
    }

    static func braced(_ labels: String) -> String { labels.isEmpty ? "" : "{\(labels)}" }

    /// A `# HELP` text: backslash and newline escaped (quotes are not, in HELP).
    static func help(_ text: String) -> String { escape(text, quotes: false) }

    private static func escape(_ text: String, quotes: Bool) -> String {
        guard text.contains(where: { $0 == "\\" || $0 == "\n" || (quotes && $0 == "\"") }) else { return text }
        var escaped = ""
        for character in text {
            switch character {
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case "\"" where quotes: escaped += "\\\""
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// A sample value: Swift's shortest round-trip form (`2.0`, `0.1`, `1e+20`), which
    /// Prometheus parses; non-finite values as Prometheus spells them.
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Inf" : "+Inf" }
        return value.description
    }

    /// Nanoseconds as decimal seconds, exact and without exponent: `0.00005`, `1.0`, `0.001138911`.
    static func seconds(_ nanoseconds: Int64) -> String {
        let sign = nanoseconds < 0 ? "-" : ""
        let magnitude = nanoseconds.magnitude
        var fraction = String(magnitude % 1_000_000_000)
        fraction = String(repeating: "0", count: 9 - fraction.count) + fraction
        while fraction.count > 1 && fraction.hasSuffix("0") { fraction.removeLast() }
        return "\(sign)\(magnitude / 1_000_000_000).\(fraction)"
    }
}
