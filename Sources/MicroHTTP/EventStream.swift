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
/// thread drains the queue through `read(into:capacity:)`.
///
/// The suspend/resume protocol (all under `lock`):
/// - the reader, finding the queue empty, suspends the connection and only then returns 0
///   (returning 0 without suspending is a busy loop at 100 % CPU);
/// - a sender resumes only a connection the reader suspended (`suspended`), and never after
///   libmicrohttpd reported the request completed (`completed`).
// why: drives an MHD connection (C) by suspend/resume; its queue and flags are under `lock`.
public final class EventStream: PendingResume, @unchecked Sendable {
    /// The buffer size given to MHD_create_response_from_callback. libmicrohttpd mallocs it for
    /// every stream, but a chunked response is read straight into the connection's write buffer
    /// (from the pool), so this buffer is never used: 4096 cost 3.75 KiB RSS per subscriber,
    /// 256 still 0.24 KiB. (An HTTP/1.0 client, not chunked, is read through it, in small reads.)
    static let blockSize = 16

    private let lock = Mutex()
    private let connection: Connection
    let socket: Int32
    private let queueLimit: Int
    /// The server's `DisconnectWatcher` token (0: not watched). Set and read only on the
    /// connection's libmicrohttpd thread (when the stream opens and when it completes).
    var watchToken: UInt64 = 0

    // Guarded by `lock`.
    private var queue: [Frame] = []
    private var head = 0               // first frame not fully written
    private var offset = 0             // bytes of queue[head] already written
    private var queuedBytes = 0
    private var suspended = false      // the reader suspended the connection
    private var resumePending = false  // woken inside a resume batch: resumed when the batch ends
    private var closing = false        // no more sends; end the response once the queue is written
    private var aborting = false       // end the connection now, unsent bytes dropped
    private var completed = false      // libmicrohttpd reported the request finished
    private var reason: StreamCloseReason?
    private var closeHandlers: [@Sendable (StreamCloseReason) -> Void] = []

    init(connection: Connection, queueLimit: Int) {
        self.connection = connection
        self.socket = connection.socket
        self.queueLimit = queueLimit
    }

    /// Queues `frame` (any thread). False once the stream is closed; a frame that would put
    /// more than `streamQueueLimit` bytes in the queue closes the stream with `.overflow`.
    @discardableResult
    public func send(_ frame: Frame) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if closing || aborting || completed { return false }
        if frame.bytes.isEmpty { return true }
        if queuedBytes + frame.bytes.count > queueLimit {
            abortLocked(.overflow)
            return false
        }
        queue.append(frame)
        queuedBytes += frame.bytes.count
        resumeLocked()
        return true
    }

    /// Ends the stream (any thread): what is queued, then `finalFrame`, is written, then the
    /// response ends. Later calls do nothing.
    public func close(finalFrame: Frame? = nil) {
        close(finalFrame: finalFrame, reason: .closedByServer)
    }

    public var isClosed: Bool {
        lock.withLock { closing || aborting || completed }
    }

    /// `body` runs exactly once, on any thread, when the stream ends; at once if it already has.
    public func onClose(_ body: @escaping @Sendable (StreamCloseReason) -> Void) {
        lock.lock()
        if completed, let reason {
            lock.unlock()
            body(reason)
            return
        }
        closeHandlers.append(body)
        lock.unlock()
    }

    // MARK: - Server side

    func close(finalFrame: Frame?, reason closeReason: StreamCloseReason) {
        lock.lock()
        defer { lock.unlock() }
        if closing || aborting || completed { return }
        closing = true
        reason = closeReason
        if let finalFrame, !finalFrame.bytes.isEmpty {
            queue.append(finalFrame)
            queuedBytes += finalFrame.bytes.count
        }
        resumeLocked()
    }

    /// Ends the connection without flushing (the stop deadline passed).
    func abort(_ abortReason: StreamCloseReason) {
        lock.withLock { abortLocked(abortReason) }
    }

    /// True while the reader has the connection suspended (stop must not leave any).
    var isSuspended: Bool { lock.withLock { (suspended || resumePending) && !completed } }

    /// libmicrohttpd's content reader, on its thread: copies queued bytes into `buffer`.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        if aborting { return -2 /* MHD_CONTENT_READER_END_WITH_ERROR */ }
        if head == queue.count {
            if closing { return -1 /* MHD_CONTENT_READER_END_OF_STREAM */ }
            // Suspend first, then return 0: MHD will not call again until a resume.
            suspended = true
            connection.suspend()
            return 0
        }
        var written = 0
        while written < capacity, head < queue.count {
            let bytes = queue[head].bytes
            let count = min(bytes.count - offset, capacity - written)
            bytes.withUnsafeBytes { source in
                (buffer + written).copyMemory(from: source.baseAddress! + offset, byteCount: count)
            }
            written += count
            offset += count
            if offset == bytes.count {
                head += 1
                offset = 0
            }
        }
        queuedBytes -= written
        compactLocked()
        return written
    }

    /// libmicrohttpd's completion notice, on its thread. `clientGone` says the request ended
    /// in an error or timeout rather than with the response's end.
    func complete(clientGone: Bool, daemonShutdown: Bool) {
        lock.lock()
        if completed {
            lock.unlock()
            return
        }
        completed = true
        suspended = false
        resumePending = false
        let final = reason ?? (daemonShutdown ? .serverStopping : clientGone ? .clientGone : .closedByServer)
        reason = final
        queue.removeAll()
        head = 0
        queuedBytes = 0
        let handlers = closeHandlers
        closeHandlers.removeAll()
        lock.unlock()
        for handler in handlers { handler(final) }
    }

    // MARK: - Under the lock

    private func resumeLocked() {
        if suspended && !completed {
            suspended = false
            if let batch = ResumeBatch.current {
                resumePending = true
                batch.add(self)
            } else {
                connection.resume()
            }
        }
    }

    /// The end of a resume batch: the deferred resume, if it is still due.
    func resumeIfPending() {
        lock.lock()
        defer { lock.unlock() }
        guard resumePending else { return }
        resumePending = false
        if !completed { connection.resume() }
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

    private func abortLocked(_ abortReason: StreamCloseReason) {
        if aborting || completed { return }
        if reason == nil || !closing { reason = abortReason }
        closing = true
        aborting = true
        queue.removeAll()
        head = 0
        offset = 0
        queuedBytes = 0
        if suspended {
            resumeLocked()          // the reader will end the response with an error
        } else if !resumePending {  // (a pending resume comes at its batch's end, to the same effect)
            shutdownSocket(socket)  // MHD may be waiting to write to a peer that does not read
        }
    }

    private func compactLocked() {
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
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
