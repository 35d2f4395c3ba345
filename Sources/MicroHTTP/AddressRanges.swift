#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A set of IP addresses given as addresses and CIDR ranges ("10.0.0.0/8", "192.0.2.7",
/// "fd00::/8", "::1"): the trusted proxies. IPv4 is kept as IPv4-mapped IPv6, so an IPv4
/// peer matches an IPv4 range whichever family its socket reports.
public struct AddressRanges: Sendable, Equatable, CustomStringConvertible {
    private struct Range: Sendable, Equatable {
        let address: IPAddress
        let prefix: Int  // of the 128 bits
    }
    private var ranges: [Range] = []
    /// What was parsed, for messages and logs.
    public private(set) var entries: [String] = []

    /// No address: nobody is trusted.
    public init() {}

    /// Parses each entry; throws `AddressRangeError` naming the first that is neither an address
    /// nor an address with a `/prefix` that fits it.
    public init(parsing entries: [String]) throws {
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let address = IPAddress(String(parts[0])) else { throw AddressRangeError(entry: entry) }
            let width = address.isIPv4 ? 32 : 128
            var prefix = width
            if parts.count == 2 {
                guard let bits = Int(parts[1]), (0...width).contains(bits), parts[1].allSatisfy(\.isASCII)
                else { throw AddressRangeError(entry: entry) }
                prefix = bits
            }
            ranges.append(Range(address: address, prefix: prefix + (address.isIPv4 ? 96 : 0)))
            self.entries.append(entry)
        }
    }

    /// Whether there is no range at all.
    public var isEmpty: Bool { ranges.isEmpty }

    /// The entries as given, comma-separated.
    public var description: String { entries.joined(separator: ",") }

    /// Whether `address` (text, as `Request.peer` has it) is in one of the ranges.
    public func contains(_ address: String) -> Bool {
        guard !ranges.isEmpty, let parsed = IPAddress(address) else { return false }
        return contains(parsed)
    }

    func contains(_ address: IPAddress) -> Bool {
        ranges.contains { address.hasPrefix($0.prefix, of: $0.address) }
    }
}

/// An entry of `AddressRanges(parsing:)` that is neither an IP address nor a CIDR range.
public struct AddressRangeError: Error, CustomStringConvertible {
    /// The entry as given.
    public let entry: String
    /// What is wrong, naming the entry, with examples of what is right.
    public var description: String {
        "'\(entry)' is not an IP address or a CIDR range (e.g. 10.0.0.0/8, 192.0.2.7, fd00::/8)"
    }
}

/// An IPv6 address, or an IPv4 one mapped into IPv6 (::ffff:a.b.c.d): the key per-address
/// limits count by.
struct IPAddress: Hashable, Sendable {
    var high: UInt64
    var low: UInt64

    var isIPv4: Bool { high == 0 && low >> 32 == 0xffff }

    /// From text: dotted IPv4 or IPv6 (with no zone or brackets); nil for anything else.
    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.init(ipv4: UInt32(bigEndian: v4.s_addr))
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            self.init(ipv6: v6)
        } else {
            return nil
        }
    }

    init(ipv4: UInt32) {
        high = 0
        low = 0xffff_0000_0000 | UInt64(ipv4)
    }

    init(ipv6: in6_addr) {
        var address = ipv6
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        high = bytes[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = bytes[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A socket address's host part; nil for a family other than IPv4 and IPv6.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            self.init(
                ipv4: address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    UInt32(bigEndian: $0.pointee.sin_addr.s_addr)
                })
        case AF_INET6:
            self.init(ipv6: address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr })
        default:
            return nil
        }
    }

    func hasPrefix(_ bits: Int, of other: IPAddress) -> Bool {
        func mask(_ bits: Int) -> UInt64 { bits <= 0 ? 0 : bits >= 64 ? .max : ~(UInt64.max >> UInt64(bits)) }
        let highMask = mask(bits)
        let lowMask = mask(bits - 64)
        return high & highMask == other.high & highMask && low & lowMask == other.low & lowMask
    }
}
