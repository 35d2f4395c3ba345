/// The admin token's comparison (SessionAccess.authorizeAdmin decides who may write the
/// global user).
enum AdminAuthorization {
    /// Compares without an early exit, and in a time that depends on the secret's length only:
    /// where `given` differs, and how long it is, change nothing in the work done. (Looping
    /// over the longer of the two would let a caller learn the token's length by timing.)
    static func constantTimeEquals(_ given: [UInt8], _ secret: [UInt8]) -> Bool {
        var difference = UInt(bitPattern: given.count ^ secret.count)
        for index in 0..<secret.count {
            let left = index < given.count ? given[index] : 0
            difference |= UInt(left ^ secret[index])
        }
        return difference == 0
    }
}
