internal import CMicroHTTPDHalfClose
internal import ConcurrencyPrimitives

/// Answers a `.deferred` request, once, from any thread. A Responder dropped without an
/// answer answers 500, so a forgotten request never holds its connection forever.
public final class Responder: Sendable {
    let exchange: DeferredExchange
    private struct Extras {
        var headers = HTTPHeaders()
        var onRespond: (@Sendable (Reply) -> Void)?
    }

    /// Set before the responder is handed on, read when it answers (on another thread).
    private let extras = Locked(Extras())

    /// Fields added to the answer, e.g. CORS headers; set before the responder is handed on.
    public var extraHeaders: HTTPHeaders {
        get { extras.withLock { $0.headers } }
        set { extras.withLock { $0.headers = newValue } }
    }

    /// Sees the answer as it is given (on the answering thread), e.g. for an access log or
    /// request metrics: a response, or an event stream; set before the responder is handed on.
    public var onRespond: (@Sendable (Reply) -> Void)? {
        get { extras.withLock { $0.onRespond } }
        set { extras.withLock { $0.onRespond = newValue } }
    }

    init(exchange: DeferredExchange) { self.exchange = exchange }

    /// Runs `body` once the request is over: its answer sent whole, or its connection gone. On
    /// libmicrohttpd's thread: it must not wait. For what an answer holds until the client has
    /// read it (a place among a limited number of large answers).
    public func whenComplete(_ body: @escaping @Sendable () -> Void) { exchange.whenComplete(body) }

    public func respond(_ response: Response) {
        var response = response
        let extras = self.extras.current
        for (name, value) in extras.headers { response.headers.add(name, value) }
        extras.onRespond?(.response(response))
        exchange.answer(response)
    }

    /// Answers with an event stream, as `Reply.eventStream` does: for a handler that learns on
    /// another thread that a stream is its answer. The stream is opened, and `open` runs, on
    /// libmicrohttpd's thread (the connection is its to set up); `onRespond` sees the stream.
    public func respond(eventStreamWith headers: HTTPHeaders, open: @escaping @Sendable (EventStream) -> Void) {
        var headers = headers
        let extras = self.extras.current
        for (name, value) in extras.headers { headers.add(name, value) }
        extras.onRespond?(.eventStream(headers: headers, open: open))
        exchange.answer(eventStreamWith: headers, open: open)
    }

    deinit {
        exchange.answer(.problem(status: 500, detail: "the request's handler finished without answering"))
    }
}

/// The state of one suspended request, shared by the MHD thread and the answering thread.
/// Resume only after the suspend, only once, never after completion, all under `lock`.
// why: resumes an MHD connection (C) from the answering thread; its mutable fields are under `lock`.
final class DeferredExchange: PendingResume, @unchecked Sendable {
    private let lock = Mutex()
    private let connection: Connection

    /// What a deferred request is answered with.
    enum Answer {
        case response(Response)
        case eventStream(headers: HTTPHeaders, open: @Sendable (EventStream) -> Void)
    }

    // Guarded by `lock`.
    private var pending: Answer?
    private var answered = false
    private var suspended = false
    private var resumePending = false  // answered inside a resume batch: resumed at its end
    private var completed = false
    private var heldSocket: Int32 = -1  // see `endHold`
    private var onComplete: [@Sendable () -> Void] = []

    init(connection: Connection) {
        self.connection = connection
    }

    /// On the MHD thread, before the handler's work can answer. From here to `endHold`, a
    /// client's end of stream is kept from libmicrohttpd, which would close without the answer.
    func suspend() {
        lock.withLock {
            suspended = true
            heldSocket = connection.socket
            mhd_half_close_hold(heldSocket)
            connection.suspend()
        }
    }

    /// On the MHD thread, once the answer is taken to be queued, or the request is over.
    func endHold() {
        let socket = lock.withLock {
            defer { heldSocket = -1 }
            return heldSocket
        }
        if socket >= 0 { mhd_half_close_release(socket) }
    }

    /// The first answer wins; it resumes the connection so MHD calls the handler again.
    /// `answer` is made only when it wins (the responder's fallback 500 is never made for a
    /// request already answered).
    @discardableResult
    func answer(_ answer: @autoclosure () -> Response) -> Bool {
        settle { .response(answer()) }
    }

    /// As `answer`, with an event stream that the MHD thread opens when it resumes.
    func answer(eventStreamWith headers: HTTPHeaders, open: @escaping @Sendable (EventStream) -> Void) {
        settle { .eventStream(headers: headers, open: open) }
    }

    @discardableResult
    private func settle(_ answer: () -> Answer) -> Bool {
        lock.lock()
        if answered || completed {
            lock.unlock()
            return false
        }
        answered = true
        pending = answer()
        if suspended {
            suspended = false
            if let batch = ResumeBatch.current {
                resumePending = true
                batch.add(self)
            } else {
                connection.resume()
            }
        }
        lock.unlock()
        return true
    }

    /// The end of a resume batch: the deferred resume, unless the request completed meanwhile.
    func resumeIfPending() {
        lock.lock()
        defer { lock.unlock() }
        guard resumePending else { return }
        resumePending = false
        if !completed { connection.resume() }
    }

    /// On the MHD thread, when it calls the handler again after the resume.
    func takeAnswer() -> Answer? {
        lock.withLock {
            defer { pending = nil }
            return pending
        }
    }

    var isAnswered: Bool { lock.withLock { answered } }

    /// The request is over (answered, or its connection closed): its socket is no longer held.
    func complete() {
        endHold()
        let done = lock.withLock {
            completed = true
            suspended = false
            resumePending = false
            defer { onComplete = [] }
            return onComplete
        }
        for body in done { body() }
    }

    /// `body` at `complete()`, or now when the request is over already.
    func whenComplete(_ body: @escaping @Sendable () -> Void) {
        let now = lock.withLock {
            if !completed { onComplete.append(body) }
            return completed
        }
        if now { body() }
    }
}
