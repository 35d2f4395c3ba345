import Foundation
import ReactorClient
import ReactorService
import ServerSupport

/// A real reactord server in this process (bundled reactors, 127.0.0.1, a free port) and a
/// `ReactorClient` pointed at it.
final class ServerFixture {
    static let token = "client-test-token"
    let server: ReactorServer
    let client: ReactorClient

    init(_ configure: (inout ServiceConfiguration) -> Void = { _ in }) throws {
        server = try TestServer.start(token: Self.token, configure)
        client = ReactorClient(baseURL: URL(string: "http://127.0.0.1:\(server.port)")!)
    }

    func stop() { server.stop() }
}

/// The bundled counter's state, as an app declares it.
struct CounterState: Decodable, Sendable, Equatable {
    var count: Int
    var alertMessage: String?
    var user: Person?
}

struct Person: Codable, Sendable, Equatable {
    var id: String
    var name: String
}

/// The counter's actions, as an app declares them.
enum CounterAction: Encodable {
    case increase, decrease, alert(String)

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .increase: _ = ActionFieldsWriter(type: "increase", to: encoder)
        case .decrease: _ = ActionFieldsWriter(type: "decrease", to: encoder)
        case let .alert(message):
            var fields = ActionFieldsWriter(type: "alert", to: encoder)
            try fields.encode(message, as: "message")
        }
    }
}

/// The counter's pulses, typed.
enum CounterPulse: Decodable, Sendable, Equatable {
    case alertMessage(String?)
    case other(String)

    private enum CodingKeys: String, CodingKey { case name, value }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let name = try container.decode(String.self, forKey: .name)
        switch name {
        case "alertMessage": self = .alertMessage(try container.decodeIfPresent(String.self, forKey: .value))
        default: self = .other(name)
        }
    }
}

/// Runs `body` with a deadline; a test never hangs on a stream that stays silent.
func withTimeout<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw TimedOut(seconds: seconds)
        }
        return value
    }
}

struct TimedOut: Error { let seconds: Double }
