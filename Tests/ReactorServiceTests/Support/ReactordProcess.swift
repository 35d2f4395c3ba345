import Foundation
import XCTest

/// The real `reactord` executable (built beside the tests by `swift build --build-tests`),
/// started on a free port for tests that need a separate process: signals, flags, fd counts.
final class ReactordProcess {
    let process = Process()
    let port: UInt16
    private let stderr = Pipe()

    init(arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = try Self.executableURL()
        // The memory store unless the test names one: no file left in the working directory.
        let store = arguments.contains("--store") || environment["REACTORD_STORE"] != nil ? [] : ["--store", "memory"]
        process.arguments = ["--port", "0"] + store + arguments
        process.environment = environment
        process.standardError = stderr
        try process.run()
        guard let port = ShutdownTests.readPort(from: stderr.fileHandleForReading) else {
            process.terminate()
            throw XCTSkip("reactord did not log its port")
        }
        self.port = port
        // Keep draining its log so a chatty server never blocks on a full pipe.
        stderr.fileHandleForReading.readabilityHandler = { handle in _ = handle.availableData }
    }

    deinit {
        if process.isRunning {
            process.terminate()
            // Still draining: it flushes its log as it exits, and would block on a full pipe.
            process.waitUntilExit()
        }
        stderr.fileHandleForReading.readabilityHandler = nil
    }

    /// Waits up to `timeout` seconds for the process to exit; its status, or nil.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        return process.isRunning ? nil : process.terminationStatus
    }

    static func executableURL() throws -> URL {
        let candidates = [
            Bundle.main.executableURL?.deletingLastPathComponent(),
            Bundle(for: ReactordProcess.self).bundleURL.deletingLastPathComponent(),
        ]
        for directory in candidates.compactMap({ $0 }) {
            let url = directory.appendingPathComponent("reactord")
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw XCTSkip("reactord is not built beside the tests (looked in \(candidates))")
    }
}
