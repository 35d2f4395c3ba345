internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum StreamCloseReason: Sendable, Equatable {
    /// The client went away: its FIN or RST (seen by the server's `DisconnectWatcher`), or a
    /// failed write.
    case clientGone
    /// The client fell behind by more than `streamQueueLimit` bytes.
    case overflow
    /// `close()` was called.
    case closedByServer
    /// The server is stopping.
    case serverStopping
}

/// One SSE subscriber's connection. `send` queues shared frames from any thread; libmicrohttpd's
/// thread drains the queue through `read(into:capacity:)`. The rules (when to suspend, resume,
/// end) are `EventStreamState`'s; this carries out its steps on the connection, under `lock`.
// why: drives an MHD connection (C) by suspend/resume; its state is under `lock`.
public final class EventStream: PendingResume, @unchecked Sendable {
    /// The buffer size given to MHD_create_response_from_callback. libmicrohttpd mallocs it for
    /// every stream, but a chunked response is read straight into the connection's write buffer
    /// (from the pool), so this buffer is never used: 4096 cost 3.75 KiB RSS per subscriber,
    /// 256 still 0.24 KiB. (An HTTP/1.0 client, not chunked, is read through it, in small reads.)
    static let blockSize = 16

    private let lock = Mutex()
    private let connection: Connection
    let socket: Int32
    /// The server's `DisconnectWatcher` token (0: not watched). Set and read only on the
    /// connection's libmicrohttpd thread (when the stream opens and when it completes).
    var watchToken: UInt64 = 0

    // Guarded by `lock`.
    private var state: EventStreamState
    private var closeHandlers: [@Sendable (StreamCloseReason) -> Void] = []

    init(connection: Connection, queueLimit: Int) {
        self.connection = connection
        self.socket = connection.socket
        state = EventStreamState(queueLimit: queueLimit)
    }

    /// Queues `frame` (any thread). False once the stream is closed; a frame that would put
    /// more than `streamQueueLimit` bytes in the queue closes the stream with `.overflow`.
    @discardableResult
    public func send(_ frame: Frame) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let (queued, wake) = state.send(frame, inBatch: ResumeBatch.current != nil)
        perform(wake)
        return queued
    }

    /// Ends the stream (any thread): what is queued, then `finalFrame`, is written, then the
    /// response ends. Later calls do nothing.
    public func close(finalFrame: Frame? = nil) {
        close(finalFrame: finalFrame, reason: .closedByServer)
    }

    public var isClosed: Bool {
        lock.withLock { state.isClosed }
    }

    /// The most bytes its queue holds before `send` closes it with `.overflow`.
    public var queueLimit: Int { state.queueLimit }  // a `let` of the state: no lock needed

    /// `body` runs exactly once, on any thread, when the stream ends; at once if it already has.
    public func onClose(_ body: @escaping @Sendable (StreamCloseReason) -> Void) {
        lock.lock()
        if state.life == .completed, let reason = state.reason {
            lock.unlock()
            body(reason)
            return
        }
        closeHandlers.append(body)
        lock.unlock()
    }

    // MARK: - Server side

    func close(finalFrame: Frame?, reason: StreamCloseReason) {
        lock.withLock {
            perform(state.close(finalFrame: finalFrame, reason: reason, inBatch: ResumeBatch.current != nil))
        }
    }

    /// Ends the connection without flushing (the stop deadline passed).
    func abort(_ reason: StreamCloseReason) {
        lock.withLock { perform(state.abort(reason, inBatch: ResumeBatch.current != nil)) }
    }

    /// True while the reader has the connection suspended (stop must not leave any).
    var isSuspended: Bool { lock.withLock { state.isSuspended } }

    /// libmicrohttpd's content reader, on its thread: copies queued bytes into `buffer`.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        switch state.read(into: buffer, capacity: capacity) {
        case let .bytes(count): return count
        case .suspend:
            // Suspended before 0 is returned: MHD will not call again until a resume.
            connection.suspend()
            return 0
        case .endOfStream: return -1  // MHD_CONTENT_READER_END_OF_STREAM
        case .endWithError: return -2  // MHD_CONTENT_READER_END_WITH_ERROR
        }
    }

    /// libmicrohttpd's completion notice, on its thread. `clientGone` says the request ended
    /// in an error or timeout rather than with the response's end.
    func complete(clientGone: Bool, daemonShutdown: Bool) {
        lock.lock()
        guard let reason = state.complete(clientGone: clientGone, daemonShutdown: daemonShutdown) else {
            lock.unlock()
            return
        }
        let handlers = closeHandlers
        closeHandlers.removeAll()
        lock.unlock()
        for handler in handlers { handler(reason) }
    }

    /// The end of a resume batch: the deferred resume, if it is still due.
    func resumeIfPending() {
        lock.withLock {
            if state.takePendingResume() { connection.resume() }
        }
    }

    /// Runs `body` with the resumes of the streams it wakes deferred to its end, on this
    /// thread. libmicrohttpd 0.9.75 resumes a connection by flagging it and waking the thread
    /// that owns it, which then walks its whole list of suspended connections: when one change
    /// wakes thousands of streams owned by another daemon thread (`threads` > 1, or a change made
    /// off libmicrohttpd's threads), resuming them one by one wakes that thread for every few of
    /// them and it walks the list each time. Deferred, they cost it one walk. Nested batches
    /// join the outermost one.
    public static func batchingResumes<T>(_ body: () throws -> T) rethrows -> T {
        if ResumeBatch.current != nil { return try body() }
        let batch = ResumeBatch()
        ResumeBatch.current = batch
        defer {
            ResumeBatch.current = nil
            for waiting in batch.waiting { waiting.resumeIfPending() }
        }
        return try body()
    }

    /// Carries out a step of `state` on the connection (under `lock`).
    private func perform(_ wake: EventStreamState.Wake) {
        switch wake {
        case .none: break
        case .resume: connection.resume()
        case .resumeAtBatchEnd: ResumeBatch.current?.add(self)
        case .shutDownSocket: shutdownSocket(socket)
        }
    }
}

/// A suspended connection whose resume a batch may defer to its end.
protocol PendingResume: AnyObject {
    func resumeIfPending()
}

/// The streams and deferred answers woken inside `EventStream.batchingResumes` on one thread.
final class ResumeBatch {
    private(set) var waiting: [any PendingResume] = []

    func add(_ connection: any PendingResume) { waiting.append(connection) }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// This thread's open batch (held by `batchingResumes`' frame while it is set).
    static var current: ResumeBatch? {
        get {
            guard let raw = pthread_getspecific(key) else { return nil }
            return Unmanaged<ResumeBatch>.fromOpaque(raw).takeUnretainedValue()
        }
        set {
            pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() })
        }
    }
}
