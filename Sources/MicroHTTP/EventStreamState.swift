/// An SSE subscriber's connection as a state machine, without the connection: what is queued,
/// who may touch libmicrohttpd's connection next, and how the stream ends. `EventStream` keeps
/// one under its lock and carries out what each step returns (suspend, resume, shut the
/// socket), so every rule of the suspend/resume protocol is here and tested without sockets.
///
/// The protocol:
/// - the reader, finding the queue empty, suspends the connection and only then returns 0
///   (returning 0 without suspending is a busy loop at 100 % CPU);
/// - a sender resumes only a connection the reader suspended, and never after libmicrohttpd
///   reported the request completed;
/// - inside a resume batch the resume waits for the batch's end (`takePendingResume`).
struct EventStreamState {
    /// Where libmicrohttpd's reader is.
    enum Reader: Equatable {
        /// Running, or due to run: it reads the queue next.
        case active
        /// It suspended the connection on an empty queue; a send must resume it.
        case suspended
        /// Woken inside a resume batch: resumed when the batch ends.
        case resumePending
    }

    /// How far the stream is from its end.
    enum Life: Equatable {
        case open
        /// No more sends: the response ends once the queue is written.
        case closing
        /// The connection ends now, unsent bytes dropped.
        case aborting
        /// libmicrohttpd reported the request finished.
        case completed
    }

    /// What a step asks of the connection. (Steps that may wake the reader take `inBatch`: whether
    /// a resume batch is open on this thread, asked only when it matters.)
    enum Wake: Equatable {
        case none
        case resume
        /// Resume at the end of the current batch.
        case resumeAtBatchEnd
        /// Shut the socket down: libmicrohttpd may be waiting to write to a peer that does not read.
        case shutDownSocket
    }

    /// What the reader returns to libmicrohttpd.
    enum Read: Equatable {
        case bytes(Int)
        /// Suspend the connection, then return 0.
        case suspend
        case endOfStream
        case endWithError
    }

    let queueLimit: Int
    private(set) var reader = Reader.active
    private(set) var life = Life.open
    /// Why it ended (or is ending): the first reason given.
    private(set) var reason: StreamCloseReason?
    private var queue: [Frame] = []
    private var head = 0  // first frame not fully written
    private var offset = 0  // bytes of queue[head] already written
    private(set) var queuedBytes = 0

    init(queueLimit: Int) { self.queueLimit = queueLimit }

    var isClosed: Bool { life != .open }

    /// True while the reader has the connection suspended (stop must not leave any).
    var isSuspended: Bool { reader != .active && life != .completed }

    /// Queues `frame` (`queued` false: the stream no longer takes frames); one that would put
    /// more than `queueLimit` bytes in the queue aborts the stream with `.overflow`. An empty
    /// queue takes any one frame: a reader that keeps up is never dropped for an event's size
    /// (a state larger than the limit would otherwise end every stream before its first byte).
    mutating func send(_ frame: Frame, inBatch: @autoclosure () -> Bool) -> (queued: Bool, wake: Wake) {
        if life != .open { return (false, .none) }
        if frame.bytes.isEmpty { return (true, .none) }
        if queuedBytes > 0, queuedBytes + frame.bytes.count > queueLimit {
            return (false, abort(.overflow, inBatch: inBatch()))
        }
        append(frame)
        return (true, wakeReader(inBatch: inBatch()))
    }

    /// Ends the stream once what is queued, then `finalFrame`, is written (nothing when it is ending already).
    mutating func close(finalFrame: Frame?, reason closeReason: StreamCloseReason, inBatch: @autoclosure () -> Bool)
        -> Wake
    {
        if life != .open { return .none }
        life = .closing
        reason = closeReason
        if let finalFrame, !finalFrame.bytes.isEmpty { append(finalFrame) }
        return wakeReader(inBatch: inBatch())
    }

    /// Ends the connection without writing what is queued.
    mutating func abort(_ abortReason: StreamCloseReason, inBatch: @autoclosure () -> Bool) -> Wake {
        if life == .aborting || life == .completed { return .none }
        if reason == nil { reason = abortReason }
        life = .aborting
        dropQueue()
        switch reader {
        case .suspended: return wakeReader(inBatch: inBatch())  // the reader ends the response with an error
        case .resumePending: return .none  // the batch's resume comes to the same effect
        case .active: return .shutDownSocket
        }
    }

    /// libmicrohttpd's reader: copies queued bytes into `buffer`.
    mutating func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Read {
        if life == .aborting { return .endWithError }
        if head == queue.count {
            if life == .closing { return .endOfStream }
            reader = .suspended
            return .suspend
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
        compact()
        return .bytes(written)
    }

    /// The end of a resume batch: true when the deferred resume is still due.
    mutating func takePendingResume() -> Bool {
        guard reader == .resumePending else { return false }
        reader = .active
        return life != .completed
    }

    /// libmicrohttpd's completion notice: the reason the stream ended with, nil when it had
    /// already completed. `clientGone`: the request ended in an error or timeout rather than
    /// with the response's end.
    mutating func complete(clientGone: Bool, daemonShutdown: Bool) -> StreamCloseReason? {
        if life == .completed { return nil }
        life = .completed
        reader = .active
        let final = reason ?? (daemonShutdown ? .serverStopping : clientGone ? .clientGone : .closedByServer)
        reason = final
        dropQueue()
        return final
    }

    // MARK: - Private

    private mutating func wakeReader(inBatch: @autoclosure () -> Bool) -> Wake {
        guard reader == .suspended, life != .completed else { return .none }
        if inBatch() {
            reader = .resumePending
            return .resumeAtBatchEnd
        }
        reader = .active
        return .resume
    }

    private mutating func append(_ frame: Frame) {
        queue.append(frame)
        queuedBytes += frame.bytes.count
    }

    private mutating func dropQueue() {
        queue.removeAll()
        head = 0
        offset = 0
        queuedBytes = 0
    }

    private mutating func compact() {
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64, head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }
}
