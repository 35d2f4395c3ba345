/// Answers a `.deferred` request, once, from any thread. A Responder dropped without an
/// answer answers 500, so a forgotten request never holds its connection forever.
public final class Responder: @unchecked Sendable {
    let exchange: DeferredExchange

    init(exchange: DeferredExchange) { self.exchange = exchange }

    public func respond(_ response: Response) {
        exchange.answer(response)
    }

    deinit {
        exchange.answer(.problem(status: 500, detail: "the request's handler finished without answering"))
    }
}

/// The state of one suspended request, shared by the MHD thread and the answering thread.
/// Resume only after the suspend, only once, never after completion, all under `lock`.
final class DeferredExchange: @unchecked Sendable {
    private let lock = Lock()
    private let connection: Connection

    // Guarded by `lock`.
    private var response: Response?
    private var answered = false
    private var suspended = false
    private var completed = false

    init(connection: Connection) {
        self.connection = connection
    }

    /// On the MHD thread, before the handler's work can answer.
    func suspend() {
        lock.withLock {
            suspended = true
            connection.suspend()
        }
    }

    /// The first answer wins; it resumes the connection so MHD calls the handler again.
    @discardableResult
    func answer(_ answer: Response) -> Bool {
        lock.lock()
        if answered || completed {
            lock.unlock()
            return false
        }
        answered = true
        response = answer
        if suspended {
            suspended = false
            connection.resume()
        }
        lock.unlock()
        return true
    }

    /// On the MHD thread, when it calls the handler again after the resume.
    func takeResponse() -> Response? {
        lock.withLock {
            defer { response = nil }
            return response
        }
    }

    var isAnswered: Bool { lock.withLock { answered } }

    func complete() {
        lock.withLock {
            completed = true
            suspended = false
        }
    }
}
