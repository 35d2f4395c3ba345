import Foundation

/// An HTTP/1.1 response as the test sees it.
struct TestResponse {
    let status: Int
    let headers: [String: String]
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    var json: Any? { try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) }
    var object: [String: Any] { json as? [String: Any] ?? [:] }
    func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// A keep-alive HTTP/1.1 client on one loopback connection.
final class HTTPClient {
    let port: UInt16
    private var socket: TestSocket?

    init(port: UInt16) { self.port = port }

    func request(_ method: String, _ path: String, body: String? = nil,
                 headers: [String: String] = [:]) throws -> TestResponse {
        try request(method, path, bodyBytes: body.map { Array($0.utf8) }, headers: headers)
    }

    func request(_ method: String, _ path: String, bodyBytes: [UInt8]?,
                 headers: [String: String] = [:]) throws -> TestResponse {
        let connection = try socket ?? TestSocket(port: port)
        socket = connection
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let bodyBytes { head += "Content-Length: \(bodyBytes.count)\r\n" }
        head += "\r\n"
        do {
            try connection.write(Array(head.utf8) + (bodyBytes ?? []))
            let response = try Self.readResponse(from: connection, method: method)
            if response.header("connection")?.lowercased() == "close" { socket = nil }
            return response
        } catch {
            socket = nil
            throw error
        }
    }

    /// Reads the status line and headers, then the body by Content-Length or chunks.
    static func readResponse(from socket: TestSocket, method: String = "GET") throws -> TestResponse {
        let statusLine = try socket.readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, let status = Int(parts[1]) else { throw TestSocket.Failure.closed }
        let headers = try readHeaders(from: socket)
        var body: [UInt8] = []
        if method == "HEAD" || status == 204 || status == 304 {
            body = []
        } else if headers["transfer-encoding"]?.lowercased() == "chunked" {
            while let chunk = try readChunk(from: socket) { body += chunk }
        } else if let length = headers["content-length"].flatMap(Int.init) {
            body = try socket.readBytes(length)
        } else {
            body = socket.readToEnd()
        }
        return TestResponse(status: status, headers: headers, body: body)
    }

    static func readHeaders(from socket: TestSocket) throws -> [String: String] {
        var headers: [String: String] = [:]
        while true {
            let line = try socket.readLine()
            if line.isEmpty { return headers }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
    }

    /// One chunk of a chunked body, `nil` after the last.
    static func readChunk(from socket: TestSocket) throws -> [UInt8]? {
        let sizeLine = try socket.readLine()
        guard let size = Int(sizeLine.split(separator: ";")[0].trimmingCharacters(in: .whitespaces), radix: 16) else {
            throw TestSocket.Failure.closed
        }
        if size == 0 {
            _ = try? socket.readLine()
            return nil
        }
        let data = try socket.readBytes(size)
        _ = try socket.readLine()
        return data
    }
}
