import Foundation

/// A fresh `Idempotency-Key`: the time in milliseconds as 12 hexadecimal digits, then 96 random
/// bits from the system's generator as 16 base64url characters (visible ASCII, as the header
/// requires). Random so that two clients, or one client after a restart, never share a key;
/// the time first so that a client's keys sort in the order they were made, and the server's
/// index of kept answers grows at its end instead of taking a page anywhere in it per key
/// (BENCHMARKS.md, "Idempotency keys").
enum IdempotencyKey {
    static func make(milliseconds: UInt64 = UInt64(max(0, Date().timeIntervalSince1970 * 1000))) -> String {
        let time = String(milliseconds & 0xFFFF_FFFF_FFFF, radix: 16)
        var generator = SystemRandomNumberGenerator()
        var random = [UInt8]()
        random.reserveCapacity(12)
        withUnsafeBytes(of: generator.next() as UInt64) { random.append(contentsOf: $0) }
        withUnsafeBytes(of: generator.next() as UInt32) { random.append(contentsOf: $0) }
        let suffix = Data(random).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
        return String(repeating: "0", count: 12 - time.count) + time + suffix
    }
}
