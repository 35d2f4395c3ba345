/// One complete request as a handler sees it: decoded, size-checked, immutable.
public struct Request: Sendable {
    public let method: HTTPMethod
    /// The percent-decoded path, without the query string.
    public let path: String
    /// Percent-decoded ('+' as space); the first value of a repeated name wins.
    public let query: [String: String]
    public let headers: HTTPHeaders
    /// The complete body, within the server's `bodyLimit`.
    public let body: [UInt8]
    /// The peer's IP address: the socket's other end, a proxy's when there is one.
    public let peer: String?
    /// The client's IP address: `peer`, or, when `peer` is one of the server's trusted proxies,
    /// the client it forwarded for (`Forwarded` or `X-Forwarded-For`). Per-client limits count
    /// this.
    public let client: String?
    /// Values of the route pattern's `{name}` segments.
    public var pathParameters: [String: String]

    public init(
        method: HTTPMethod, path: String, query: [String: String] = [:],
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], peer: String? = nil,
        client: String? = nil, pathParameters: [String: String] = [:]
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.peer = peer
        self.client = client ?? peer
        self.pathParameters = pathParameters
    }
}

/// What is known of a request when MicroHTTP answers it itself, before or instead of a handler:
/// for `HTTPServerConfiguration.decorate`.
public struct RequestHead: Sendable {
    public let method: HTTPMethod
    /// The path as received (undecoded where it was not valid UTF-8).
    public let path: String
    public let headers: HTTPHeaders
    /// False for the answers libmicrohttpd makes itself: it stopped reading the head early, so
    /// a field the client sent (an `Origin`, say) may be missing from `headers`.
    public let hasAllFields: Bool

    public init(method: HTTPMethod, path: String, headers: HTTPHeaders, hasAllFields: Bool = true) {
        self.method = method
        self.path = path
        self.headers = headers
        self.hasAllFields = hasAllFields
    }
}
