import Foundation

/// An HTTP/1.1 response as the test sees it: header names lowercased, repeated fields joined.
public struct TestResponse {
    public let status: Int
    public let headers: [String: String]
    public let body: [UInt8]

    public init(_ parsed: ResponseParser) {
        status = parsed.status ?? 0
        var headers: [String: String] = [:]
        for (name, value) in parsed.headers {
            let key = name.lowercased()
            headers[key] = headers[key].map { "\($0), \(value)" } ?? value
        }
        self.headers = headers
        body = parsed.body
    }

    public var text: String { String(decoding: body, as: UTF8.self) }
    public var json: Any? { try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
    public var object: [String: Any] { json as? [String: Any] ?? [:] }
    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// A keep-alive HTTP/1.1 client on one loopback connection (reconnects after a close).
public final class HTTPClient {
    public let port: UInt16
    /// Seconds a response may take to start arriving.
    private let timeout: Double
    private var socket: TestSocket?

    public init(port: UInt16, timeout: Double = 5) {
        self.port = port
        self.timeout = timeout
    }

    public func request(
        _ method: String, _ path: String, body: String? = nil,
        headers: [String: String] = [:]
    ) throws -> TestResponse {
        try request(method, path, bodyBytes: body.map { Array($0.utf8) }, headers: headers)
    }

    public func request(
        _ method: String, _ path: String, bodyBytes: [UInt8]?,
        headers: [String: String] = [:]
    ) throws -> TestResponse {
        if let idle = socket, idle.peerHasClosed { socket = nil }  // e.g. the server's idle timeout
        let connection = try socket ?? TestSocket(port: port, timeout: timeout)
        socket = connection
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let bodyBytes { head += "Content-Length: \(bodyBytes.count)\r\n" }
        head += "\r\n"
        do {
            try connection.write(Array(head.utf8) + (bodyBytes ?? []))
            guard let parsed = connection.readResponse(headOnly: method == "HEAD") else {
                throw TestSocket.Failure.closed
            }
            let response = TestResponse(parsed)
            if response.header("connection")?.lowercased() == "close" { socket = nil }
            return response
        } catch {
            socket = nil
            throw error
        }
    }
}
