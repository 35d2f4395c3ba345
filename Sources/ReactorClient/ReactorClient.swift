import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A reactord server, seen from Swift: open sessions, send actions, follow their events.
///
/// ```swift
/// let client = ReactorClient(baseURL: URL(string: "http://127.0.0.1:8080")!)
/// let session = try await client.createSession(reactor: "counter", state: CounterState.self)
/// try await session.send(TypedAction("increase"))
/// for try await event in session.events() { ... }
/// ```
public struct ReactorClient: Sendable {
    /// The server's address; routes are resolved under it (`http://host:8080/api` works too).
    public let baseURL: URL
    let configuration: URLSessionConfiguration
    let http: URLSession

    /// `configuration` is used for every request; event streams get their own `URLSession`
    /// from it (its `timeoutIntervalForRequest` is the longest silence a stream may have;
    /// the server's heartbeat, 15 s by default, keeps a live one talking).
    public init(baseURL: URL, configuration: URLSessionConfiguration = .default) {
        self.baseURL = baseURL
        self.configuration = configuration
        http = URLSession(configuration: configuration)
    }

    /// `POST /sessions`: a new session of `reactor` (`nil`: the server's default kind).
    public func createSession<State: Decodable & Sendable>(
        reactor: String? = nil, state _: State.Type = State.self
    ) async throws -> ReactorSession<State> {
        let body = try JSONSerialization.data(withJSONObject: reactor.map { ["reactor": $0] } ?? [:])
        let reply: SessionReply<State> = try await request("POST", "sessions", body: body, expect: 201)
        return ReactorSession(client: self, id: reply.session, reactor: reply.reactor,
                              initial: Snapshot(version: reply.version, state: reply.state))
    }

    /// A session someone else created, by its id. Nothing is checked until it is used.
    public func session<State: Decodable & Sendable>(id: String, state _: State.Type = State.self) -> ReactorSession<State> {
        ReactorSession(client: self, id: id, reactor: nil, initial: nil)
    }

    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        var url = baseURL
        for component in path.split(separator: "/") { url.appendPathComponent(String(component)) }
        guard !query.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        components.queryItems = query
        return components.url ?? url
    }

    func request<Reply: Decodable>(_ method: String, _ path: String, body: Data? = nil,
                                   expect status: Int = 200) async throws -> Reply {
        let data = try await send(method, path, body: body, expect: status)
        do {
            return try JSONDecoder().decode(Reply.self, from: data)
        } catch {
            throw ReactorClientError.undecodable(String(decoding: data, as: UTF8.self), error)
        }
    }

    @discardableResult
    func send(_ method: String, _ path: String, body: Data? = nil, expect status: Int) async throws -> Data {
        var request = URLRequest(url: url(path))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let http = self.http
        let (data, response): (Data, URLResponse) = try await withCheckedThrowingContinuation { continuation in
            http.dataTask(with: request) { data, response, error in
                if let error { return continuation.resume(throwing: ReactorClientError.transport(error)) }
                continuation.resume(returning: (data ?? Data(), response!))
            }.resume()
        }
        let code = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard code == status else { throw ReactorClientError.problem(Problem(status: code, body: data)) }
        return data
    }
}

/// One session on the server: its id is the capability to use it.
public struct ReactorSession<State: Decodable & Sendable>: Sendable {
    /// The client that makes this session's requests.
    public let client: ReactorClient
    /// The session's id, as `POST /sessions` returned it.
    public let id: String
    /// The reactor kind, when this client created the session.
    public let reactor: String?
    /// The state the session was created with, when this client created it.
    public let initial: Snapshot<State>?

    /// `POST /sessions/{id}/actions`: sends `action` (its JSON form: `{"type": ..., fields}`; see
    /// `ActionFieldsWriter` and `TypedAction`) and returns the state after it. The session is in
    /// the path, where a balancer can route on it.
    @discardableResult
    public func send<Action: Encodable>(_ action: Action) async throws -> Snapshot<State> {
        let body = try JSONEncoder().encode(action)
        let reply: SessionReply<State> = try await client.request("POST", "sessions/\(id)/actions", body: body)
        return Snapshot(version: reply.version, state: reply.state)
    }

    /// `GET /sessions/{id}`: the current state.
    public func current() async throws -> Snapshot<State> {
        let reply: SessionReply<State> = try await client.request("GET", "sessions/\(id)")
        return Snapshot(version: reply.version, state: reply.state)
    }

    /// `DELETE /sessions/{id}`: ends it; every stream of it gets `event: end`.
    public func delete() async throws {
        try await client.send("DELETE", "sessions/\(id)", expect: 204)
    }

    /// The session's states and pulses as they happen, from `GET /sessions/{id}/events`.
    ///
    /// The sequence starts with the current state (or, given `lastEventID`, with what
    /// followed it). When the connection drops, it reconnects after the server's `retry`
    /// (or `reconnectDelay`) and resumes with `Last-Event-ID`, so no event is lost while
    /// the server's history covers the gap. It ends when the server ends the stream on
    /// purpose (`event: end`: session deleted or expired, server stopped) and throws on an
    /// answer that retrying cannot fix (404 unknown session, 400 bad `fields`).
    /// Stop early by leaving the loop or cancelling its task.
    ///
    /// - Parameters:
    ///   - pulses: how to decode `event: pulse` data (`{"name":..,"value":..}`).
    ///   - fields: `?fields=`: only these state fields, and only when they change. `State`
    ///     must then decode from just those fields.
    ///   - lastEventID: resume after this version (`Last-Event-ID`) instead of starting from
    ///     the current state.
    ///   - reconnectDelay: how long to wait before reconnecting, instead of the server's
    ///     `retry:` (3 s when it sent none).
    /// - Returns: the events, in order, until the stream ends or the task is cancelled.
    public func events<Pulse: Decodable & Sendable>(
        pulses _: Pulse.Type = AnyPulse.self, fields: [String]? = nil, lastEventID: UInt64? = nil,
        reconnectDelay: Duration? = nil
    ) -> AsyncThrowingStream<ReactorEvent<State, Pulse>, any Error> {
        var query: [URLQueryItem] = []
        if let fields { query.append(URLQueryItem(name: "fields", value: fields.joined(separator: ","))) }
        let source = EventStreamConnection(url: client.url("sessions/\(id)/events", query: query),
                                 configuration: client.configuration,
                                 lastEventID: lastEventID.map(String.init), reconnectDelay: reconnectDelay)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await source.run { event in
                        if event.event == "end" { return false }
                        guard let version = event.id.flatMap(UInt64.init) else { return true }
                        let data = Data(event.data.utf8)
                        switch event.event {
                        case "state":
                            continuation.yield(.state(try JSONDecoder().decode(State.self, from: data), version: version))
                        case "pulse":
                            continuation.yield(.pulse(try JSONDecoder().decode(Pulse.self, from: data), version: version))
                        default:
                            break
                        }
                        return true
                    }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}

/// What a session's event stream carries. `version` is the event's id: the session's
/// version after it, comparable with `Snapshot.version`.
public enum ReactorEvent<State: Sendable, Pulse: Sendable>: Sendable {
    /// A new state (`event: state`), or with `fields`, the chosen fields after they changed.
    case state(State, version: UInt64)
    /// A pulse (`event: pulse`): a `@Pulse` field was assigned.
    case pulse(Pulse, version: UInt64)

    /// The event's id: the session's version after it.
    public var version: UInt64 {
        switch self {
        case let .state(_, version), let .pulse(_, version): version
        }
    }
}

/// A session's state at a version.
public struct Snapshot<State: Sendable>: Sendable {
    /// The session's version: the id of its latest event (0 for a new session, +1 per event).
    public let version: UInt64
    /// The state at `version`.
    public let state: State
}

/// An RFC 9457 problem document, or whatever body came with an unexpected status.
public struct Problem: Error, Sendable, CustomStringConvertible {
    /// The answer's HTTP status code (0 when it was not an HTTP answer).
    public let status: Int
    /// The problem document's `title`, if the body is one.
    public let title: String?
    /// The problem document's `detail`, if the body is one: what was wrong.
    public let detail: String?
    /// The answer's body as text.
    public let body: String

    init(status: Int, body: Data) {
        self.status = status
        self.body = String(decoding: body, as: UTF8.self)
        let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
        title = object?["title"] as? String
        detail = object?["detail"] as? String
    }

    /// `HTTP status: detail`, else the title, else the body.
    public var description: String { "HTTP \(status): \(detail ?? title ?? body)" }
}

/// Why a `ReactorClient` or `ReactorSession` call failed.
public enum ReactorClientError: Error, Sendable, CustomStringConvertible {
    /// The server answered with an error status.
    case problem(Problem)
    /// No answer: connection refused, timeout, ...
    case transport(any Error)
    /// An answer that does not decode as expected.
    case undecodable(String, any Error)

    /// The problem's description, or what went wrong with the transport or the decoding.
    public var description: String {
        switch self {
        case let .problem(problem): problem.description
        case let .transport(error): "transport: \(error)"
        case let .undecodable(body, error): "undecodable reply \(body.prefix(200)): \(error)"
        }
    }
}

private struct SessionReply<State: Decodable>: Decodable {
    let session: String
    let reactor: String?
    let version: UInt64
    let state: State
}

