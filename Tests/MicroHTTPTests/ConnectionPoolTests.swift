import XCTest

@testable import MicroHTTP

/// Issue 26, item 3: libmicrohttpd 0.9.75 zeroes a connection's whole memory pool after every
/// keep-alive request, so the pool is 4 KiB, not 8. What that leaves a request: a head of up
/// to ~3.8 KB is served, one past the pool is answered 431, and the connection goes on serving
/// requests after a head that filled most of it.
final class ConnectionPoolTests: XCTestCase {
    func testTheRequestHeadLimitIsThePool() throws {
        let server = try startServer { router in
            router.add(.GET, "/hello") { _ in .response(Response(status: 200, body: Array("hi".utf8))) }
        }
        defer { server.stop() }
        func head(padding: Int) -> String {
            "GET /hello HTTP/1.1\r\nHost: t\r\nX-Pad: \(String(repeating: "a", count: padding))\r\n\r\n"
        }
        let socket = try TestSocket(port: server.port)
        for padding in [3_500, 100, 3_500] {  // keep-alive: the pool is reset between them
            try socket.write(head(padding: padding))
            XCTAssertEqual(socket.readResponse()?.status, 200, "a \(padding)-byte header fits")
        }
        let large = try TestSocket(port: server.port)
        try large.write(head(padding: 4_200))
        XCTAssertEqual(large.readResponse()?.status, 431, "a head past the 4 KiB pool")
    }
}
