/// The admin token's comparison (SessionAccess.authorizeAdmin decides who may write the
/// global user).
enum AdminAuthorization {
    /// Compares without an early exit, and in a time that depends on the secret's length only:
    /// where `given` differs, and how long it is, change nothing in the work done. (Looping
    /// over the longer of the two would let a caller learn the token's length by timing.)
    /// Generic so that a test can count the reads instead of timing them.
    static func constantTimeEquals<Given: RandomAccessCollection, Secret: RandomAccessCollection>(
        _ given: Given, _ secret: Secret
    ) -> Bool where Given.Element == UInt8, Given.Index == Int, Secret.Element == UInt8, Secret.Index == Int {
        var difference = UInt(bitPattern: given.count ^ secret.count)
        // Every round reads one byte of each (wrapping around a shorter `given`): no branch on
        // where `given` ends.
        let givenCount = Swift.max(given.count, 1)
        for offset in 0..<secret.count {
            let left = given.isEmpty ? 0 : given[given.startIndex + offset % givenCount]
            difference |= UInt(left ^ secret[secret.startIndex + offset])
        }
        return difference == 0
    }
}
