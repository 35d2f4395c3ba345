import Foundation

/// A fresh `Idempotency-Key`: 128 random bits from the system's generator, as 22 base64url
/// characters (visible ASCII, as the header requires). Random rather than counted, so two
/// clients, or one client after a restart, never share a key.
enum IdempotencyKey {
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = [UInt8]()
        bytes.reserveCapacity(16)
        for _ in 0..<2 {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
