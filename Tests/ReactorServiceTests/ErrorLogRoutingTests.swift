import Foundation
import Logging
import ReactorCore
import ReactorService
import XCTest

/// reactord's libmicrohttpd log lines reach swift-log at debug level, tagged `source=libmicrohttpd`.
final class ErrorLogRoutingTests: XCTestCase {
    struct Record {
        let level: Logger.Level
        let message: String
        let source: String?
    }

    struct CaptureHandler: LogHandler {
        let capture: Locked<[Record]>
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            let record = Record(
                level: event.level, message: "\(event.message)", source: merged["source"].map { "\($0)" })
            capture.update { $0.append(record) }
        }
    }

    func testVanishingSubscribersAreLoggedAtDebugOnly() throws {
        let capture = Locked<[Record]>([])
        let logger = Logger(label: "reactord-test") { _ in CaptureHandler(capture: capture) }
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.adminToken = "t"
        configuration.heartbeat = .milliseconds(200)
        let server = ReactorServer(configuration: configuration, logger: logger)
        server.register("counter") { _ in TinyReactor() }
        try server.start()
        let session = try XCTUnwrap(
            try HTTPClient(port: server.port).request("POST", "/sessions").object["session"] as? String)
        let fleet = try StreamFleet(port: server.port, count: 200, path: "/sessions/\(session)/events")
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 200 })
        fleet.resetAll()
        XCTAssertTrue(waitUntil(timeout: 10) { server.openStreamCount == 0 })
        server.stop()

        let mhd = capture.value.filter { $0.source == "libmicrohttpd" }
        XCTAssertFalse(mhd.isEmpty, "libmicrohttpd's lines arrive through swift-log")
        XCTAssertTrue(mhd.allSatisfy { $0.level == .debug }, "\(mhd.map(\.level))")
        XCTAssertFalse(capture.value.contains { $0.level >= .info && $0.message.contains("Failed to send") })
        print("200 vanished subscribers: \(mhd.count) libmicrohttpd lines, all at debug")
    }
}

/// The smallest servable reactor, so this test needs nothing of Examples.
final class TinyReactor: Reactor {
    enum Action: Decodable { case poke }
    struct State: Encodable { var pokes = 0 }
    let initialState = State()
}
