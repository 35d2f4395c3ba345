import Foundation
import ReactorService
import ServerSupport
import XCTest

/// A real reactord server with the bundled reactors on 127.0.0.1 and a free port.
final class ServerFixture {
    static let token = "test-admin-token"
    let server: ReactorServer
    let client: HTTPClient

    init(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) throws {
        server = try TestServer.start(token: Self.token, configure)
        client = HTTPClient(port: server.port)
    }

    var port: UInt16 { server.port }

    func stop() { server.stop() }

    /// Opens a session and returns its id.
    func createSession(file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let response = try client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
        XCTAssertEqual(response.status, 201, response.text, file: file, line: line)
        return try XCTUnwrap(response.object["session"] as? String, file: file, line: line)
    }

    /// `POST /action` with the action given as JSON.
    @discardableResult
    func send(_ session: String, _ actionJSON: String) throws -> TestResponse {
        try client.request("POST", "/action", body: #"{"session":"\#(session)","action":\#(actionJSON)}"#)
    }

    func subscribe(_ session: String, query: String = "", headers: [String: String] = [:]) throws -> EventStreamClient {
        try EventStreamClient(port: port, path: "/sessions/\(session)/events\(query)", headers: headers)
    }

    func putUser(id: String, name: String) throws -> TestResponse {
        try client.request(
            "PUT", "/user", body: #"{"id":"\#(id)","name":"\#(name)"}"#,
            headers: ["Authorization": "Bearer \(Self.token)"])
    }
}

extension TestEvent {
    var state: [String: Any] { object }
}
