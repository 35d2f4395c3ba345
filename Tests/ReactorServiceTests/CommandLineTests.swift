import Foundation
import Logging
import ReactorService
import XCTest

/// The real `reactord`'s command line (ReactorServiceCLI): a bad flag or variable is exit 2
/// (argument-parser's EX_USAGE) with a message naming it, never a crash or a silent default.
final class CommandLineTests: XCTestCase {
    private struct Outcome {
        let status: Int32
        let output: String
    }

    /// Runs reactord to its end (at most 20 s) and gives its status and stdout+stderr.
    private func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Outcome {
        let process = Process()
        process.executableURL = try ReactordProcess.executableURL()
        process.arguments = arguments
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let deadline = Date().addingTimeInterval(20)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            XCTFail("reactord \(arguments) \(environment) still ran after 20 s")
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        return Outcome(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }

    func testBadFlagsExit2NamingTheFlag() throws {
        let cases: [([String], String)] = [
            (["--port", "65536"], "--port"),
            (["--port=-1"], "--port"),
            (["--threads", "0"], "--threads"),
            (["--threads=-3"], "--threads"),
            (["--session-ttl", "-1"], "--session-ttl"),
            (["--unload-after", "-1"], "--unload-after"),
            (["--max-stored-sessions", "0"], "--max-stored-sessions"),
            (["--session-ttl", "nan"], "--session-ttl"),
            (["--max-sessions", "0"], "--max-sessions"),
            (["--body-limit", "10"], "--body-limit"),
            (["--heartbeat", "0"], "--heartbeat"),
            (["--heartbeat", "inf"], "--heartbeat"),  // trapped in Dispatch before it was refused
            (["--history=-1"], "--history"),
            (["--action-log=-1"], "--action-log"),
            (["--action-log-age", "-1"], "--action-log-age"),
            (["--action-log-age", "0"], "--action-log-age"),
            (["--action-log-age", "inf"], "--action-log-age"),
            (["--connection-limit", "0"], "--connection-limit"),
            (["--connection-limit", "\(Int.max)"], "--connection-limit"),  // overflowed and trapped at start
            (["--body-limit", "\(Int.max)"], "--body-limit"),
            (["--admin-token", ""], "--admin-token"),
            (["--admin-token-file", "/no-such-folder/token"], "--admin-token-file"),  // only warned, and ran
            (["--admin-token-file", "/etc/hostname/token"], "--admin-token-file"),  // a file is no folder
            (["--admin-token-file", "/tmp"], "--admin-token-file"),  // a folder is no file
            (["--advertise", "http://10.0.0.5"], "--advertise"),  // every forward then failed: no port
            (["--advertise", "http://:8080"], "--advertise"),
            (["healthcheck", "--timeout=-1"], "--timeout"),  // the subcommand's usage errors exit 2 too (was 64)
            (["healthcheck", "--bogus"], "--bogus"),
            (["healthcheck", "--path", "readyz"], "--path"),  // was sent as a bad request line, "answered 400"
            (["--cors-origins", "not a url"], "--cors-origins"),  // an origin that never matches is a mistake
            (["--cors-origins", "https://app.example.com/login"], "--cors-origins"),
            (["--jwt-secret", String(repeating: "s", count: 32), "--jwt-issuer", ""], "--jwt-issuer"),
            (["--jwt-secret", String(repeating: "s", count: 32), "--jwt-audience", ""], "--jwt-audience"),
            (["--connections-per-ip=-1"], "--connections-per-ip"),
            (["--head-timeout=-1"], "--head-timeout"),
            (["--head-timeout", "inf"], "--head-timeout"),
            (["--trusted-proxies", "10.0.0.0/8,proxy.example"], "--trusted-proxies"),
            (["--trusted-proxies", "10.0.0.0/40"], "--trusted-proxies"),
            (["--stream-max-age", "1e300"], "--stream-max-age"),
            (["--connection-timeout", "0"], "--connection-timeout"),
            (["--log-level", "loud"], "--log-level"),
            (["--max-sessions", "many"], "--max-sessions"),
            (["--bogus"], "--bogus"),
            (["--port"], "--port"),
        ]
        // A negative value as its own argument reaches the option's check, which says what is wrong.
        for arguments in [
            ["--idempotency-ttl", "-1"], ["--session-create-rate", "-1"], ["healthcheck", "--timeout", "-2"],
        ] {
            let outcome = try run(arguments)
            XCTAssertEqual(outcome.status, 2, "\(arguments): \(outcome.output)")
            XCTAssertFalse(outcome.output.contains("Missing value"), "\(arguments): \(outcome.output)")
            XCTAssertTrue(
                outcome.output.contains("-1") || outcome.output.contains("-2"), "\(arguments): \(outcome.output)")
        }
        // Good addresses pass, so the next bad flag is the one named.
        for address in ["http://[::1]:8080", "http://10.0.0.5:8080/", "http://node-a:8080/reactord"] {
            let outcome = try run(["--advertise", address, "--threads", "0"])
            XCTAssertEqual(outcome.status, 2, outcome.output)
            XCTAssertFalse(outcome.output.contains("--advertise"), "\(address): \(outcome.output)")
        }
        for (arguments, name) in cases {
            let outcome = try run(arguments)
            XCTAssertEqual(outcome.status, 2, "\(arguments): \(outcome.output)")
            XCTAssertTrue(outcome.output.contains("Error:"), "\(arguments): \(outcome.output)")
            XCTAssertTrue(outcome.output.contains(name), "\(arguments) should name \(name): \(outcome.output)")
            XCTAssertFalse(outcome.output.contains("listening"), "\(arguments) must not start: \(outcome.output)")
        }
    }

    /// A generated token is never written through a symbolic link (it would land wherever the
    /// link points): the command line refuses one, and the library does not follow it.
    func testTheAdminTokenFileIsNotASymbolicLink() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("token-link-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let link = folder.appendingPathComponent("reactord-admin-token").path
        let target = folder.appendingPathComponent("elsewhere").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)

        let outcome = try run(["--admin-token-file", link])
        XCTAssertEqual(outcome.status, 2, outcome.output)
        XCTAssertTrue(outcome.output.contains("--admin-token-file must not be a symbolic link"), outcome.output)

        var configuration = ServiceConfiguration()
        configuration.adminTokenFile = link
        configuration.port = 0
        let server = ReactorServer(configuration: configuration, logger: Logger(label: "test"))
        try server.start()
        server.stop()
        XCTAssertFalse(FileManager.default.fileExists(atPath: target), "the token went through the link")
    }

    /// A second reactord started in the same folder, whose start fails (the port is taken, or the
    /// store is another server's) or that runs beside the first, never replaces the token file
    /// the first one wrote: the first server's token keeps working.
    func testAnotherServerInTheSameFolderLeavesTheRunningServersToken() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokenFile = folder.appendingPathComponent("reactord-admin-token").path
        let store = "sqlite:" + folder.appendingPathComponent("reactord.sqlite").path
        let first = try ReactordProcess(arguments: ["--admin-token-file", tokenFile, "--store", store])
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let client = HTTPClient(port: first.port)
        func putUser() throws -> Int {
            try client.request(
                "PUT", "/user", body: #"{"id":"u1","name":"jay"}"#,
                headers: ["Authorization": "Bearer \(token)"]
            ).status
        }
        XCTAssertEqual(try putUser(), 200)

        let portTaken = try run(["--port", String(first.port), "--admin-token-file", tokenFile, "--store", "memory"])
        XCTAssertEqual(portTaken.status, 1, portTaken.output)
        let storeTaken = try run(["--port", "0", "--admin-token-file", tokenFile, "--store", store])
        XCTAssertEqual(storeTaken.status, 1, storeTaken.output)
        for outcome in [portTaken, storeTaken] {
            XCTAssertFalse(outcome.output.contains("made one for this run"), outcome.output)
        }
        let beside = try ReactordProcess(arguments: ["--admin-token-file", tokenFile])
        XCTAssertNotEqual(beside.port, first.port)

        XCTAssertEqual(try String(contentsOfFile: tokenFile, encoding: .utf8), token + "\n")
        XCTAssertEqual(try putUser(), 200, "the running server's token file was replaced")
    }

    func testBadEnvironmentVariablesExit2NamingTheVariable() throws {
        let cases: [(String, String)] = [
            ("REACTORD_PORT", "70000"), ("REACTORD_PORT", "http"), ("REACTORD_THREADS", "0"),
            ("REACTORD_SESSION_TTL", "-5"), ("REACTORD_MAX_SESSIONS", "1.5"), ("REACTORD_BODY_LIMIT", "1"),
            ("REACTORD_HEARTBEAT", "inf"), ("REACTORD_HISTORY", "-1"), ("REACTORD_CONNECTION_LIMIT", "0"),
            ("REACTORD_CONNECTIONS_PER_IP", "-2"), ("REACTORD_STREAM_MAX_AGE", "-1"),
            ("REACTORD_HEAD_TIMEOUT", "-1"), ("REACTORD_TRUSTED_PROXIES", "10.0.0.1/8/8"),
            ("REACTORD_CONNECTION_TIMEOUT", "0"), ("REACTORD_LOG_LEVEL", "verbose"),
            ("REACTORD_ADMIN_TOKEN_FILE", "/no-such-folder/token"), ("REACTORD_ADVERTISE", "http://node-a"),
            ("REACTORD_ACTION_LOG", "-1"), ("REACTORD_ACTION_LOG", "many"), ("REACTORD_ACTION_LOG_AGE", "-60"),
            // Values so large they crashed the server, at start or at its first connection.
            ("REACTORD_THREADS", "9223372036854775807"), ("REACTORD_THREADS", "100000"),
            ("REACTORD_CONNECTIONS_PER_IP", "9223372036854775800"), ("REACTORD_CONNECTIONS_PER_IP", "16777217"),
            ("REACTORD_CONNECTION_TIMEOUT", "9223372036854775807"), ("REACTORD_CONNECTION_TIMEOUT", "4294967296"),
        ]
        for (name, value) in cases {
            let outcome = try run([], environment: [name: value])
            XCTAssertEqual(outcome.status, 2, "\(name)=\(value): \(outcome.output)")
            XCTAssertTrue(outcome.output.contains(name), "\(name)=\(value) should be named: \(outcome.output)")
        }
        // A choice's message lists its values, not a type's name.
        for (name, value, listed) in [
            ("REACTORD_ACCESS_LOG", "yes", "one of on, off"), ("REACTORD_LOG_FORMAT", "xml", "one of text, json"),
            ("REACTORD_LOG_LEVEL", "loud", "trace, debug, info"),
        ] {
            let outcome = try run([], environment: [name: value])
            XCTAssertEqual(outcome.status, 2, "\(name)=\(value): \(outcome.output)")
            XCTAssertTrue(outcome.output.contains(listed), "\(name)=\(value) should list \(listed): \(outcome.output)")
        }
        // healthcheck reads REACTORD_PORT after parsing: a bad one is a usage error all the same.
        let healthcheck = try run(["healthcheck"], environment: ["REACTORD_PORT": "abc"])
        XCTAssertEqual(healthcheck.status, 2, healthcheck.output)
        XCTAssertTrue(healthcheck.output.contains("REACTORD_PORT"), healthcheck.output)
        // The flag wins over a bad variable (it is never read), and the message names the flag.
        let outcome = try run(["--threads", "0"], environment: ["REACTORD_THREADS": "2"])
        XCTAssertEqual(outcome.status, 2)
        XCTAssertTrue(outcome.output.contains("--threads must be from 1 to 256"), outcome.output)
    }

    /// The container's HEALTHCHECK asks the address the server binds (`REACTORD_HOST`), not
    /// always 127.0.0.1: a server bound to another address was reported unhealthy for good.
    func testTheHealthcheckAsksTheAddressTheServerBinds() throws {
        let server = try ReactordProcess(arguments: ["--host", "127.0.0.2"])
        let port = String(server.port)
        let there = try run(["healthcheck", "--server-port", port], environment: ["REACTORD_HOST": "127.0.0.2"])
        XCTAssertEqual(there.status, 0, there.output)
        XCTAssertTrue(there.output.contains("healthy: GET /readyz answered 200"), there.output)
        let byFlag = try run(["healthcheck", "--server-port", port, "--server-host", "127.0.0.2"])
        XCTAssertEqual(byFlag.status, 0, byFlag.output)
        let elsewhere = try run(["healthcheck", "--server-port", port])
        XCTAssertEqual(elsewhere.status, 1, elsewhere.output)
        XCTAssertTrue(elsewhere.output.contains("cannot connect to 127.0.0.1 port \(port)"), elsewhere.output)
    }

    /// `--connection-timeout` takes decimals, as every time does, rounded up to whole seconds:
    /// half a second is one.
    func testAConnectionTimeoutWithDecimalsServes() throws {
        for value in ["1.5", "0.5"] {
            let server = try ReactordProcess(arguments: ["--connection-timeout", value])
            XCTAssertEqual(try HTTPClient(port: server.port).request("GET", "/healthz").status, 200, value)
        }
    }

    func testLogLevelMessageListsTheLevels() throws {
        let outcome = try run(["--log-level", "loud"])
        XCTAssertTrue(outcome.output.contains("trace, debug, info, notice, warning, error, critical"), outcome.output)
    }

    func testHelpListsEveryOptionWithItsVariable() throws {
        let outcome = try run(["--help"])
        XCTAssertEqual(outcome.status, 0)
        // Help is wrapped to the terminal's width: compare with the line breaks folded away.
        let help = outcome.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for variable in [
            "REACTORD_HOST", "REACTORD_PORT", "REACTORD_THREADS", "REACTORD_ADMIN_TOKEN",
            "REACTORD_SESSION_TTL", "REACTORD_LOG_LEVEL", "REACTORD_CORS_ORIGINS",
            "REACTORD_HEAD_TIMEOUT", "REACTORD_TRUSTED_PROXIES", "REACTORD_CONNECTIONS_PER_IP",
            "REACTORD_ACTION_LOG", "REACTORD_ACTION_LOG_AGE",
        ] {
            XCTAssertTrue(help.contains("[env: \(variable)]"), "\(variable) missing from --help")
        }
        XCTAssertTrue(outcome.output.contains("USAGE: reactord"), outcome.output)
    }

    /// `--action-log` and `REACTORD_ACTION_LOG` reach the server: 0 turns the log off (the
    /// actions route answers 404), a length keeps that many entries; the flag wins.
    func testActionLogFlagAndVariableReachTheServer() throws {
        func actions(_ server: ReactordProcess, after sending: Int) throws -> TestResponse {
            let client = HTTPClient(port: server.port)
            let created = try client.request("POST", "/sessions", body: #"{"reactor":"counter"}"#)
            XCTAssertEqual(created.status, 201, created.text)
            let id = try XCTUnwrap(created.object["session"] as? String)
            for _ in 0..<sending {
                XCTAssertEqual(
                    try client.request("POST", "/sessions/\(id)/actions", body: #"{"type":"increase"}"#).status, 200)
            }
            return try client.request("GET", "/sessions/\(id)/actions")
        }
        let off = try actions(try ReactordProcess(arguments: ["--action-log", "0"]), after: 1)
        XCTAssertEqual(off.status, 404, off.text)
        XCTAssertTrue(off.text.contains("--action-log 0"), off.text)

        let short = try actions(try ReactordProcess(arguments: [], environment: ["REACTORD_ACTION_LOG": "2"]), after: 3)
        XCTAssertEqual(short.status, 200, short.text)
        let entries = try XCTUnwrap(short.object["actions"] as? [[String: Any]])
        XCTAssertEqual(entries.map { $0["version"] as? Int }, [2, 3], short.text)

        let flagWins = try actions(
            try ReactordProcess(
                arguments: ["--action-log", "0"],
                environment: [
                    "REACTORD_ACTION_LOG": "5",
                    "REACTORD_ACTION_LOG_AGE": "60",
                ]), after: 1)
        XCTAssertEqual(flagWins.status, 404, flagWins.text)
    }

    func testGoodVariablesServe() throws {
        let server = try ReactordProcess(
            arguments: [],
            environment: [
                "REACTORD_THREADS": "2", "REACTORD_LOG_LEVEL": "debug", "REACTORD_ADMIN_TOKEN": "secret",
            ])
        let client = HTTPClient(port: server.port)
        XCTAssertEqual(try client.request("GET", "/healthz").status, 200)
        let denied = try client.request(
            "PUT", "/user", body: #"{"id":"u","name":"n"}"#,
            headers: ["Authorization": "Bearer wrong"])
        XCTAssertEqual(denied.status, 403)
        let allowed = try client.request(
            "PUT", "/user", body: #"{"id":"u","name":"n"}"#,
            headers: ["Authorization": "Bearer secret"])
        XCTAssertEqual(allowed.status, 200)
    }
}
