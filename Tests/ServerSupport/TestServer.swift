import Examples
import Logging
import ReactorService

/// A real reactord server in this process for the tests: the bundled reactors, 127.0.0.1,
/// a free port, a known admin token, a short heartbeat, a quiet log.
public enum TestServer {
    public static func start(
        token: String,
        _ configure: (inout ServiceConfiguration) -> Void = { _ in }
    ) throws -> ReactorServer {
        var configuration = ServiceConfiguration()
        configuration.port = 0
        configuration.adminToken = token
        configuration.heartbeat = .milliseconds(500)
        configuration.stopDeadline = .seconds(2)
        // The tests open hundreds of sessions from 127.0.0.1 in a blink: no per-address creation
        // limit here (scripts/check-auth tests that limit on the executable).
        configuration.sessionCreateRate = 0
        configure(&configuration)
        var logger = Logger(label: "reactord-test")
        logger.logLevel = .warning
        let server = ReactorServer(configuration: configuration, logger: logger)
        server.registerBundledReactors()
        try server.start()
        return server
    }
}
