import Examples
import Foundation
import Logging
import ReactorService
import XCTest

/// A real reactord server with the bundled reactors on 127.0.0.1 and a free port.
final class ServerFixture {
    static let token = "test-admin-token"
    let server: ReactorServer
    let client: HTTPClient

    init(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) throws {
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.adminToken = Self.token
        configuration.heartbeat = 0.5
        configuration.stopDeadline = 2
        configure(&configuration)
        var logger = Logger(label: "reactord-test")
        logger.logLevel = .warning
        server = ReactorServer(configuration: configuration, logger: logger)
        server.registerBundledReactors()
        try server.start()
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
        try client.request("PUT", "/user", body: #"{"id":"\#(id)","name":"\#(name)"}"#,
                           headers: ["Authorization": "Bearer \(Self.token)"])
    }
}

extension TestEvent {
    var state: [String: Any] { object }
}
