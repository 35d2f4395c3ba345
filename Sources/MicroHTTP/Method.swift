#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An HTTP method, compared by its exact (case-sensitive, RFC 9110) token.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let GET = HTTPMethod(rawValue: "GET")
    public static let HEAD = HTTPMethod(rawValue: "HEAD")
    public static let POST = HTTPMethod(rawValue: "POST")
    public static let PUT = HTTPMethod(rawValue: "PUT")
    public static let DELETE = HTTPMethod(rawValue: "DELETE")
    public static let OPTIONS = HTTPMethod(rawValue: "OPTIONS")
    public static let PATCH = HTTPMethod(rawValue: "PATCH")

    public var description: String { rawValue }

    /// From libmicrohttpd's method string; the common methods reuse their static values.
    init(cString: UnsafePointer<CChar>) {
        if strcmp(cString, "GET") == 0 {
            self = .GET
        } else if strcmp(cString, "POST") == 0 {
            self = .POST
        } else {
            self.init(rawValue: String(cString: cString))
        }
    }
}

extension HTTPMethod {
    /// The methods an `Allow` field names for a resource with `methods`: HEAD wherever GET is
    /// (a GET handler answers it), in a stable order.
    public static func allowed(_ methods: some Sequence<HTTPMethod>) -> [HTTPMethod] {
        var allowed = Set(methods)
        if allowed.contains(.GET) { allowed.insert(.HEAD) }
        return allowed.sorted { $0.rawValue < $1.rawValue }
    }
}
