/// A blocking test client on one socket (keep-alive: several requests on it) that sends raw
/// bytes and reads responses through `ResponseParser`: MicroHTTP's tests and the hostile-input
/// tests use it to send what no well-behaved client would.
public final class TestClient {
    public let socket: TestSocket
    public var fd: Int32 { socket.fd }

    /// `from`: the loopback address to connect from (127.0.0.2 is another client than 127.0.0.1).
    public init(port: UInt16, receiveTimeout: Double = 10, from source: String? = nil) throws {
        socket = try TestSocket(port: port, timeout: receiveTimeout, from: source)
    }

    /// Sends raw bytes; a failed write (the server closed) is ignored: the read that follows says so.
    public func send(_ text: String) { send(Array(text.utf8)) }
    public func send(_ bytes: [UInt8]) { try? socket.write(bytes) }

    /// Reads one complete response (nil on timeout or a connection closed before it).
    public func readResponse(headOnly: Bool = false) -> ResponseParser? {
        socket.readResponse(headOnly: headOnly)
    }

    public func request(
        _ method: String, _ target: String, headers: [String] = [],
        body: String? = nil
    ) -> ResponseParser? {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for header in headers { text += header + "\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        text += "\r\n" + (body ?? "")
        send(text)
        return readResponse(headOnly: method == "HEAD")
    }

    /// True when the server has closed this connection (EOF within `timeout`).
    public func isClosedByPeer(timeout: Double = 2) -> Bool {
        socket.isClosedByPeer(timeout: timeout)
    }
}
