extension FixedWidthInteger {
    /// `text` read as decimal digits only: Swift's own parse also takes a sign (`+5`, `-0`).
    init?(digits text: some StringProtocol) {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        self.init(text)
    }
}
