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
///
/// Requests that change something (actions, creating and deleting sessions) carry a fresh
/// `Idempotency-Key` each, and are retried with that same key when their answer goes missing
/// or the server asks to come back (see ``RetryPolicy``): a retried action is applied once.
public struct ReactorClient: Sendable {
    /// The server's address; routes are resolved under it (`http://host:8080/api` works too).
    public let baseURL: URL
    /// When and how often a failed request is tried again.
    public let retry: RetryPolicy
    let configuration: URLSessionConfiguration
    let http: URLSession

    /// `configuration` is used for every request; event streams get their own `URLSession`
    /// from it (its `timeoutIntervalForRequest` is the longest silence a stream may have;
    /// the server's heartbeat, 15 s by default, keeps a live one talking, and it is also how
    /// long a request waits for its answer before it counts as lost and is retried).
    /// `retry`: when and how often a request is tried again (``RetryPolicy/never`` to throw
    /// every failure at once).
    public init(baseURL: URL, configuration: URLSessionConfiguration = .default, retry: RetryPolicy = .default) {
        self.baseURL = baseURL
        self.retry = retry
        self.configuration = configuration
        http = URLSession(configuration: configuration)
    }

    /// `POST /sessions`: a new session of `reactor` (`nil`: the server's default kind).
    ///
    /// `idempotencyKey`: the request's `Idempotency-Key` (nil: a fresh random one); give your
    /// own to retry the creation yourself later, after this call has thrown. The same key gets
    /// the same session, not a second one.
    public func createSession<State: Decodable & Sendable>(
        reactor: String? = nil, state _: State.Type = State.self, idempotencyKey: String? = nil
    ) async throws -> ReactorSession<State> {
        let body = try JSONSerialization.data(withJSONObject: reactor.map { ["reactor": $0] } ?? [:])
        let (reply, replayed): (SessionReply<State>, Bool) = try await request(
            "POST", "sessions", body: body, idempotencyKey: idempotencyKey ?? IdempotencyKey.make(), expect: 201)
        return ReactorSession(
            client: self, id: reply.session, reactor: reply.reactor,
            initial: Snapshot(version: reply.version, state: reply.state, replayed: replayed))
    }

    /// A session someone else created, by its id. Nothing is checked until it is used.
    public func session<State: Decodable & Sendable>(id: String, state _: State.Type = State.self) -> ReactorSession<
        State
    > {
        ReactorSession(client: self, id: id, reactor: nil, initial: nil)
    }

    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        var url = baseURL
        for component in path.split(separator: "/") { url.appendPathComponent(String(component)) }
        guard !query.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return url
        }
        components.queryItems = query
        return components.url ?? url
    }

    /// The decoded answer, and whether it was a replay (`Idempotent-Replayed: true`).
    func request<Reply: Decodable>(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
        idempotencyKey: String? = nil,
        expect status: Int = 200
    ) async throws -> (Reply, replayed: Bool) {
        let answer = try await send(
            method, path, query: query, body: body, idempotencyKey: idempotencyKey,
            expect: status)
        do {
            return (try JSONDecoder().decode(Reply.self, from: answer.body), answer.replayed)
        } catch {
            throw ReactorClientError.undecodable(String(decoding: answer.body, as: UTF8.self), error)
        }
    }

    /// One request, retried under `retry` with the same `idempotencyKey` until it gets an
    /// answer that retrying cannot change; throws the last failure when the retries run out.
    @discardableResult
    func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
        idempotencyKey: String? = nil, expect status: Int
    ) async throws -> Answer {
        var request = URLRequest(url: url(path, query: query))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let idempotencyKey { request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key") }
        var attempt = 0
        while true {
            var failure: ReactorClientError
            var retryAfter: Double?
            do {
                let (data, response) = try await perform(request)
                if response.statusCode == status {
                    let replayed = response.value(forHTTPHeaderField: "Idempotent-Replayed")?.lowercased() == "true"
                    return Answer(body: data, replayed: replayed)
                }
                failure = .problem(Problem(status: response.statusCode, body: data))
                retryAfter = RetryPolicy.retryAfter(response.value(forHTTPHeaderField: "Retry-After"))
                guard
                    RetryPolicy.retries(
                        status: response.statusCode, keyed: idempotencyKey != nil,
                        hasRetryAfter: retryAfter != nil)
                else { throw failure }
            } catch let ReactorClientError.transport(error) where RetryPolicy.retries(transport: error) {
                failure = .transport(error)
            }
            guard attempt < retry.maxRetries else { throw failure }
            try await Task.sleep(for: retry.delay(attempt: attempt, retryAfter: retryAfter))
            attempt += 1
        }
    }

    /// One attempt: the answer, whatever its status, or `.transport` when there was none.
    private func perform(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let http = self.http
        return try await withCheckedThrowingContinuation { continuation in
            http.dataTask(with: request) { data, response, error in
                if let error { return continuation.resume(throwing: ReactorClientError.transport(error)) }
                guard let response = response as? HTTPURLResponse else {
                    return continuation.resume(throwing: ReactorClientError.transport(URLError(.badServerResponse)))
                }
                continuation.resume(returning: (data ?? Data(), response))
            }.resume()
        }
    }

    struct Answer {
        let body: Data
        /// The server answered from what it stored for the request's `Idempotency-Key`.
        let replayed: Bool
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
    ///
    /// The action is applied once, however often it is retried: it carries an
    /// `Idempotency-Key`, the same on every retry (see ``RetryPolicy``). When a retry meets an
    /// action that already ran (its first answer was lost), the server replays that first
    /// answer: the result's ``Snapshot/replayed`` is then true, and its state is the one right
    /// after the action, which later actions may have changed since.
    ///
    /// - Parameters:
    ///   - action: the action, as its JSON form encodes.
    ///   - idempotencyKey: the `Idempotency-Key` (nil: a fresh random one). Give your own, and
    ///     keep it, to retry the same action yourself after this call has thrown (after the
    ///     retries ran out, or in a later run of the app); the server keeps keys for a day by
    ///     default (`--idempotency-ttl`).
    /// - Returns: the session's state and version after the action.
    @discardableResult
    public func send<Action: Encodable>(_ action: Action, idempotencyKey: String? = nil) async throws -> Snapshot<State>
    {
        // Sorted keys: the same action is the same bytes in every run of the app (JSONEncoder's own
        // order changes from one process to the next), so a key kept and sent again later is
        // replayed, not refused with 422 as another request.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let body = try encoder.encode(action)
        let (reply, replayed): (SessionReply<State>, Bool) = try await client.request(
            "POST", "sessions/\(id)/actions", body: body, idempotencyKey: idempotencyKey ?? IdempotencyKey.make())
        return Snapshot(version: reply.version, state: reply.state, replayed: replayed)
    }

    /// `GET /sessions/{id}`: the current state.
    public func current() async throws -> Snapshot<State> {
        let (reply, _): (SessionReply<State>, Bool) = try await client.request("GET", "sessions/\(id)")
        return Snapshot(version: reply.version, state: reply.state, replayed: false)
    }

    /// `DELETE /sessions/{id}`: ends it; every stream of it gets `event: end`. Retried with one
    /// `Idempotency-Key` (`idempotencyKey`, or a fresh one), so a retry after a lost answer
    /// does not fail with 404.
    public func delete(idempotencyKey: String? = nil) async throws {
        try await client.send(
            "DELETE", "sessions/\(id)", idempotencyKey: idempotencyKey ?? IdempotencyKey.make(),
            expect: 204)
    }

    /// `GET /sessions/{id}/actions`: one page of the session's action log, oldest first.
    ///
    /// - Parameters:
    ///   - after: only the entries whose `version` is after this one (a page's ``ActionLogPage/next``);
    ///     nil: from the first entry kept, those that changed nothing at version 0 included
    ///     (`after: 0` leaves them out).
    ///   - limit: the most entries in the page, 1 to 1000 (a page never ends between two entries
    ///     of the same version, so it may hold a few more).
    /// - Returns: the entries, and ``ActionLogPage/next`` when more may follow. Throws a 404
    ///   ``Problem`` when the server keeps no action log (`--action-log 0`).
    public func actions(after: UInt64? = nil, limit: Int = 100) async throws -> ActionLogPage {
        var query = [URLQueryItem(name: "limit", value: String(limit))]
        if let after { query.append(URLQueryItem(name: "after", value: String(after))) }
        let (page, _): (ActionLogPage, Bool) = try await client.request("GET", "sessions/\(id)/actions", query: query)
        return page
    }

    /// The session's whole action log (as much as the server keeps), read a page at a time.
    public func allActions() async throws -> [LoggedActionEntry] {
        var entries: [LoggedActionEntry] = []
        var page = try await actions(limit: 1_000)
        entries += page.entries
        while let next = page.next {
            page = try await actions(after: next, limit: 1_000)
            entries += page.entries
        }
        return entries
    }

    /// `GET /sessions/{id}/states/{version}`: the state the session had at `version`, while its
    /// history keeps it (`--history`); a 404 ``Problem`` otherwise, or for a version it has not reached.
    public func state(at version: UInt64) async throws -> Snapshot<State> {
        let (reply, _): (StateReply<State>, Bool) = try await client.request("GET", "sessions/\(id)/states/\(version)")
        return Snapshot(version: reply.version, state: reply.state, replayed: false)
    }

    /// `POST /sessions/{id}/fork`: a new session of the same kind that starts, at version 0,
    /// from the state this one had at `version` (nil: its current version).
    ///
    /// It is sent under an `Idempotency-Key` (a fresh one unless `idempotencyKey` is given) and
    /// retried as an action is: a repeat gets the first fork back, never a second one.
    /// - Returns: a handle on the new session, with its ``ReactorSession/initial`` state.
    public func fork(at version: UInt64? = nil, idempotencyKey: String? = nil) async throws -> ReactorSession<State> {
        let body = try JSONSerialization.data(withJSONObject: version.map { ["version": NSNumber(value: $0)] } ?? [:])
        let (reply, _): (SessionReply<State>, Bool) = try await client.request(
            "POST", "sessions/\(id)/fork", body: body, idempotencyKey: idempotencyKey ?? IdempotencyKey.make(),
            expect: 201)
        return ReactorSession(
            client: client, id: reply.session, reactor: reply.reactor,
            initial: Snapshot(version: reply.version, state: reply.state, replayed: false))
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
        let source = EventStreamConnection(
            url: client.url("sessions/\(id)/events", query: query),
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
                            continuation.yield(
                                .state(try JSONDecoder().decode(State.self, from: data), version: version))
                        case "pulse":
                            continuation.yield(
                                .pulse(try JSONDecoder().decode(Pulse.self, from: data), version: version))
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
    /// True when the server answered a retry from the answer it had stored for the request's
    /// `Idempotency-Key` (`Idempotent-Replayed: true`): the request had already run, once, and
    /// its first answer was lost on the way. Always false for ``ReactorSession/current()``.
    public let replayed: Bool
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
    /// The server answered with an error status (for 502, 503, 504, and 409 to a keyed request:
    /// the last answer, after the retries of ``RetryPolicy``).
    case problem(Problem)
    /// No answer: connection refused, reset or closed early, timeout, ... (after the retries
    /// of ``RetryPolicy``, when the error was one that retrying might fix).
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

private struct StateReply<State: Decodable>: Decodable {
    let session: String
    let version: UInt64
    let state: State
}

private struct SessionReply<State: Decodable>: Decodable {
    let session: String
    let reactor: String?
    let version: UInt64
    let state: State
}
