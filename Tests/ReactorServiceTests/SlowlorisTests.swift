import Foundation
import Logging
import MicroHTTP
import ReactorService
import XCTest

/// Issue 25 item 7: with the defaults, one client address cannot shut everyone out, and behind
/// a trusted proxy the per-client limits count the client it forwards for.
final class SlowlorisTests: XCTestCase {
    /// The executable with its defaults but a small connection limit (200, so 20 per address):
    /// 1,000 slowloris connections from 127.0.0.1 leave 127.0.0.2 answered within 100 ms.
    /// Before the default per-address limit, they filled the server and 127.0.0.2 timed out.
    func testWithTheDefaultsSlowlorisFromOneAddressLeavesAnotherServed() throws {
        let server = try ReactordProcess(arguments: ["--connection-limit", "200", "--admin-token", "t"])
        let attack = SlowlorisAttack(port: server.port, connections: 1_000)
        defer { attack.stop() }
        XCTAssertTrue(waitUntil(timeout: 15) { attack.opened >= 1_000 }, "\(attack.opened) attacking connections")
        usleep(500_000)
        var slowest = 0.0
        for _ in 0..<20 {
            let start = monotonicNow()
            let client = try TestClient(port: server.port, receiveTimeout: 2, from: "127.0.0.2")
            XCTAssertEqual(client.request("GET", "/healthz")?.status, 200)
            slowest = max(slowest, monotonicNow() - start)
            usleep(100_000)
        }
        XCTAssertLessThan(slowest, 0.1, "the slowest answer to 127.0.0.2 took \(slowest) s")
    }

    /// The session-creation rate counts the address a trusted proxy forwards for, one client
    /// behind it apart from another; an untrusted peer's X-Forwarded-For is ignored.
    func testTheCreationRateCountsTheClientATrustedProxyForwardsFor() throws {
        let fixture = try ServerFixture {
            $0.sessionCreateRate = 0.001
            $0.sessionCreateBurst = 1
            $0.trustedProxies = try! AddressRanges(parsing: ["127.0.0.2"])
        }
        defer { fixture.stop() }
        func create(from source: String, forwardedFor: String) throws -> Int? {
            let client = try TestClient(port: fixture.port, receiveTimeout: 5, from: source)
            return client.request(
                "POST", "/sessions",
                headers: [
                    "Content-Type: application/json",
                    "X-Forwarded-For: \(forwardedFor)",
                ],
                body: #"{"reactor":"counter"}"#)?.status
        }
        XCTAssertEqual(try create(from: "127.0.0.2", forwardedFor: "203.0.113.1"), 201)
        XCTAssertEqual(try create(from: "127.0.0.2", forwardedFor: "203.0.113.1"), 429)
        XCTAssertEqual(
            try create(from: "127.0.0.2", forwardedFor: "203.0.113.2"), 201, "another client behind the proxy")

        XCTAssertEqual(try create(from: "127.0.0.1", forwardedFor: "198.51.100.1"), 201)
        XCTAssertEqual(
            try create(from: "127.0.0.1", forwardedFor: "198.51.100.2"), 429,
            "an untrusted peer's X-Forwarded-For is not believed: both count as 127.0.0.1")
    }

    /// The access log's `peer` is the client a trusted proxy forwards for, with the proxy as
    /// `via`; an untrusted peer is logged as itself, whatever it claims.
    func testTheAccessLogNamesTheForwardedClient() throws {
        let lines = Locked<[Logger.Metadata]>([])
        let logger = Logger(label: "reactord-test") { _ in MetadataCapture(lines: lines) }
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.adminToken = "t"
        configuration.trustedProxies = try AddressRanges(parsing: ["127.0.0.2"])
        let server = ReactorServer(configuration: configuration, logger: logger)
        server.register("counter") { _ in TinyReactor() }
        try server.start()
        defer { server.stop() }
        for source in ["127.0.0.2", "127.0.0.1"] {
            let client = try TestClient(port: server.port, receiveTimeout: 5, from: source)
            XCTAssertEqual(
                client.request("GET", "/sessions/none-\(source)", headers: ["X-Forwarded-For: 203.0.113.5"])?.status,
                404)
        }
        func line(_ source: String) -> Logger.Metadata? {
            lines.value.first { $0["path"].map { "\($0)" } == "/sessions/none-\(source)" }
        }
        XCTAssertEqual(line("127.0.0.2")?["peer"].map { "\($0)" }, "203.0.113.5")
        XCTAssertEqual(line("127.0.0.2")?["via"].map { "\($0)" }, "127.0.0.2")
        XCTAssertEqual(line("127.0.0.1")?["peer"].map { "\($0)" }, "127.0.0.1")
        XCTAssertNil(line("127.0.0.1")?["via"])
    }

    /// A trusted proxy holds more connections than the per-address limit; an untrusted address
    /// does not.
    func testATrustedProxyIsNotLimitedPerAddress() throws {
        let fixture = try ServerFixture {
            $0.connectionsPerIP = 2
            $0.trustedProxies = try! AddressRanges(parsing: ["127.0.0.2/32"])
        }
        defer { fixture.stop() }
        let proxied = try (0..<5).map { _ in try TestClient(port: fixture.port, receiveTimeout: 5, from: "127.0.0.2") }
        for client in proxied { XCTAssertEqual(client.request("GET", "/healthz")?.status, 200) }
        let direct = try (0..<3).map { _ in try TestClient(port: fixture.port, receiveTimeout: 5) }
        XCTAssertEqual(direct.map { $0.request("GET", "/healthz")?.status }, [200, 200, 429])
    }

    /// `--trusted-proxies` and `REACTORD_TRUSTED_PROXIES` reach the server; `--head-timeout` too.
    func testTheFlagsAndVariablesReachTheServer() throws {
        for (arguments, environment) in [
            (["--trusted-proxies", "127.0.0.2, 10.0.0.0/8", "--head-timeout", "1"], [:]),
            ([], ["REACTORD_TRUSTED_PROXIES": "127.0.0.0/30", "REACTORD_HEAD_TIMEOUT": "1"]),
        ] {
            let server = try ReactordProcess(
                arguments: ["--connections-per-ip", "1", "--admin-token", "t"] + arguments,
                environment: environment)
            let proxied = try (0..<3).map { _ in try TestClient(port: server.port, receiveTimeout: 5, from: "127.0.0.2")
            }
            XCTAssertEqual(
                proxied.map { $0.request("GET", "/healthz")?.status }, [200, 200, 200], "\(arguments) \(environment)")
            let slow = try TestClient(port: server.port, receiveTimeout: 5)
            slow.send("GET /healthz HTTP/1.1\r\n")
            let start = monotonicNow()
            XCTAssertTrue(slow.isClosedByPeer(timeout: 3), "a head left unfinished is cut at --head-timeout")
            XCTAssertLessThan(monotonicNow() - start, 2)
        }
    }

    func testTheDefaultPerAddressLimitIsATenthOfTheConnectionLimit() {
        var configuration = ServiceConfiguration()
        XCTAssertEqual(configuration.effectiveConnectionsPerIP, 1_000)
        configuration.connectionLimit = 50
        XCTAssertEqual(configuration.effectiveConnectionsPerIP, 8)
        configuration.connectionsPerIP = 0
        XCTAssertEqual(configuration.effectiveConnectionsPerIP, 0)
        XCTAssertEqual(ServiceConfiguration().headTimeout, .seconds(10))
    }
}

/// Keeps each log line's metadata.
private struct MetadataCapture: LogHandler {
    let lines: Locked<[Logger.Metadata]>
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]
    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        lines.update { $0.append(merged) }
    }
}
