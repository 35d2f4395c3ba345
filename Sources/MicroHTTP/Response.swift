/// A complete response: status, header fields, body bytes. Content-Length is set by the server.
public struct Response: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int = 200, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `body` as `application/json`.
    public static func json(_ body: [UInt8], status: Int = 200) -> Response {
        // Room for the fields a route adds (an ETag, CORS), so that adding them does not grow it.
        var fields: [HTTPHeaders.Element] = []
        fields.reserveCapacity(4)
        fields.append((name: "Content-Type", value: "application/json"))
        return Response(status: status, headers: HTTPHeaders(fields: fields), body: body)
    }

    public static func text(
        _ text: String, status: Int = 200,
        contentType: String = "text/plain; charset=utf-8"
    ) -> Response {
        Response(
            status: status, headers: HTTPHeaders(fields: [(name: "Content-Type", value: contentType)]),
            body: Array(text.utf8))
    }

    /// RFC 9457: an `application/problem+json` document with type, title (default: the
    /// reason phrase), status and detail.
    public static func problem(
        status: Int, detail: String, title: String? = nil,
        type: String = "about:blank", headers: HTTPHeaders = HTTPHeaders()
    ) -> Response {
        var json = "{\"type\":"
        JSON.appendString(type, to: &json)
        json += ",\"title\":"
        JSON.appendString(title ?? ReasonPhrase.of(status), to: &json)
        json += ",\"status\":\(status),\"detail\":"
        JSON.appendString(detail, to: &json)
        json += "}"
        var fields = headers
        fields.replace("Content-Type", "application/problem+json")
        return Response(status: status, headers: fields, body: Array(json.utf8))
    }

    /// `text` as a problem's detail quotes what a client sent: its first `limit` Unicode scalars,
    /// then "…". (Scalars, not characters: a character can hold any number of combining marks.)
    package static func excerpt(_ text: some StringProtocol, limit: Int = 64) -> String {
        let scalars = text.unicodeScalars
        guard scalars.count > limit else { return String(text) }
        var cut = String.UnicodeScalarView(scalars.prefix(limit))
        cut.append("…")
        return String(cut)
    }

    /// The status sent: one of three digits (RFC 9110 §15), else 500.
    var wireStatus: Int { (100...999).contains(status) ? status : 500 }

    /// Whether an answer with `status` has no body whatever its Content-Length says (RFC 9110
    /// §6.4.1: 1xx, 204, 304).
    public static func isBodiless(_ status: Int) -> Bool {
        (100...199).contains(status) || status == 204 || status == 304
    }

    /// What a stopping server answers new requests: 503, to retry (elsewhere, or after the restart).
    static let stopping = Response.problem(
        status: 503, detail: "the server is stopping; retry",
        headers: HTTPHeaders([("Retry-After", "1")]))
}

/// The little JSON writing the layer itself needs (problem documents); the package's log
/// handlers escape with it too, so every log line escapes alike.
package enum JSON {
    package static func appendString(_ string: String, to out: inout String) {
        var escaped: [UInt8] = []
        appendEscaped(string.utf8, to: &escaped)
        out += "\"" + String(decoding: escaped, as: UTF8.self) + "\""
    }

    /// The inside of a JSON string: `"`, `\` and control characters escaped, the rest as it is.
    /// Byte by byte: the bytes it escapes are ASCII, which never occur inside a multi-byte character.
    @inlinable  // per field of every access line, from another module: specialised there
    package static func appendEscaped<Bytes: Collection<UInt8>>(_ bytes: Bytes, to out: inout [UInt8]) {
        var clean = bytes.startIndex
        for index in bytes.indices {
            let byte = bytes[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            out.append(contentsOf: bytes[clean..<index])
            clean = bytes.index(after: index)
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
            default:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xf)])
            }
        }
        out.append(contentsOf: bytes[clean...])
    }
}

/// RFC 9110 reason phrases, for problem titles.
enum ReasonPhrase {
    static func of(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 422: return "Unprocessable Content"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        case 507: return "Insufficient Storage"
        default: return "Status \(status)"
        }
    }
}
