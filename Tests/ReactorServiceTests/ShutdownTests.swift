import Foundation
import XCTest

/// The real executable on the memory store, stopped by SIGTERM with live subscribers: the
/// sessions are over, so every stream gets `event: end` (DurabilityTests has the durable case).
final class ShutdownTests: XCTestCase {
    func testSIGTERMEndsStreamsAnswersAndExitsZero() throws {
        let process = Process()
        process.executableURL = try ReactordProcess.executableURL()
        process.arguments = ["--port", "0", "--admin-token", "t", "--store", "memory"]
        process.environment = ["REACTORD_HEARTBEAT": "1", "REACTORD_LOG_LEVEL": "info"]
        let stderr = Pipe()
        process.standardError = stderr
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        let port = try XCTUnwrap(Self.readPort(from: stderr.fileHandleForReading), "the server logs its port")
        let client = HTTPClient(port: port)
        let created = try client.request("POST", "/sessions")
        let session = try XCTUnwrap(created.object["session"] as? String)
        let streams = try (0..<20).map { _ in try EventStreamClient(port: port, path: "/sessions/\(session)/events") }
        for stream in streams { XCTAssertEqual(stream.next()?.event, "state") }
        let action = try client.request(
            "POST", "/action",
            body: #"{"session":"\#(session)","action":{"type":"increase"}}"#)
        XCTAssertEqual(action.status, 200)

        kill(process.processIdentifier, SIGTERM)
        for stream in streams {
            let rest = stream.drain(quiet: 2)
            XCTAssertEqual(rest.last?.event, "end")
            XCTAssertEqual(rest.last?.object["reason"] as? String, "shutdown")
            XCTAssertTrue(stream.ended)
        }
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertFalse(process.isRunning)
        XCTAssertEqual(process.terminationStatus, 0)
    }

    /// A supervisor may stop the server as soon as it logs its port. libdispatch used to register
    /// the signal handlers later, on a thread of its own: about one start in seven (nearly every
    /// one on a busy machine) ignored that first SIGTERM and ran on.
    func testSIGTERMRightAfterThePortIsLoggedStops() throws {
        for attempt in 1...20 {
            let server = try ReactordProcess(arguments: ["--admin-token", "t"])
            kill(server.process.processIdentifier, SIGTERM)
            let status = server.waitForExit(timeout: 5)
            XCTAssertEqual(status, 0, "start \(attempt): SIGTERM sent when the port was logged")
            if status != 0 { return }
        }
    }

    /// Reads the log until the `listening` line and takes its `port=` value.
    static func readPort(from handle: FileHandle) -> UInt16? {
        var text = ""
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let data = handle.availableData
            if data.isEmpty { return nil }
            text += String(decoding: data, as: UTF8.self)
            if let range = text.range(of: #"port=(\d+)"#, options: .regularExpression) {
                return UInt16(text[range].dropFirst(5))
            }
        }
        return nil
    }
}
