import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard error, buffered the way nginx's `access_log … buffer=` is: a line is appended to a
/// buffer, and a thread of its own writes the buffer out 50 ms after its first line (at once when
/// it holds 256 KiB), so a request thread never waits for a write(2) of its access line (unless
/// 16 MiB wait: the writer is stuck).
///
/// Nothing of a graceful stop is lost: a line at warning or above is written out at once, with
/// every line before it, and the buffer is written out when the process exits (`atexit`: a
/// return from `main` after SIGTERM, or `exit`). A `kill -9` loses at most the last 50 ms.
final class LogOutput: @unchecked Sendable {
    static let standardError = LogOutput(descriptor: STDERR_FILENO)

    private static let delayNanoseconds = 50_000_000
    /// Past this the writer is woken at once; a request thread still never writes.
    private static let soon = 256 << 10
    /// Past this a request thread writes the buffer out itself: the writer is stuck (a blocked
    /// pipe), and the log may not take all memory.
    private static let limit = 16 << 20

    private let descriptor: Int32
    /// Guards `pending` and `writerRunning`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Signalled when `pending` gets its first line, and when it passes `soon`.
    private let lineArrived = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Held for each write(2), taken while `mutex` is held: batches leave in the order they were cut.
    private let writing = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var pending: [UInt8] = []
    /// The buffer last written out, emptied, to be `pending` next: a new buffer per batch was
    /// page faults (a fresh mapping, ~2,000 a second at 40k lines a second) under `mutex`.
    private var spare: [UInt8] = []
    private var writerRunning = false

    private init(descriptor: Int32) {
        self.descriptor = descriptor
        pthread_mutex_init(mutex, nil)
        pthread_mutex_init(writing, nil)
        pthread_cond_init(lineArrived, nil)
        atexit { LogOutput.standardError.flush() }
    }

    /// Appends `line` (a whole line: lines of several threads never interleave).
    func write(_ line: String) {
        var line = line
        line.withUTF8 { write(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Appends whole lines given as bytes.
    func write(bytes: [UInt8]) {
        bytes.withUnsafeBytes { write(bytes: $0) }
    }

    private func write(bytes: UnsafeRawBufferPointer) {
        pthread_mutex_lock(mutex)
        let wasEmpty = pending.isEmpty
        pending.append(contentsOf: bytes)
        if pending.count >= Self.limit || !startWriterLocked() {
            writeOutLocked()   // unlocks `mutex`
            return
        }
        // At 40k lines a second `soon` fills in ~25 ms: the writer writes it, not this thread.
        if wasEmpty || (pending.count >= Self.soon && pending.count - bytes.count < Self.soon) {
            pthread_cond_signal(lineArrived)
        }
        pthread_mutex_unlock(mutex)
    }

    /// Writes out what is buffered.
    func flush() {
        pthread_mutex_lock(mutex)
        writeOutLocked()
    }

    /// Cuts the buffer and writes it; called with `mutex` held, returns with it released.
    private func writeOutLocked() {
        var batch: [UInt8] = []
        swap(&batch, &pending)
        swap(&pending, &spare)
        pthread_mutex_lock(writing)
        pthread_mutex_unlock(mutex)
        batch.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                if written <= 0 { break }   // stderr closed or broken: the lines have nowhere to go
                offset += written
            }
        }
        pthread_mutex_unlock(writing)
        // Back as the spare (after `writing`: `mutex` is never taken while `writing` is held).
        batch.removeAll(keepingCapacity: true)
        pthread_mutex_lock(mutex)
        if spare.capacity < batch.capacity { swap(&spare, &batch) }
        pthread_mutex_unlock(mutex)
    }

    /// Starts the writer thread on first use; false when no thread can be made (lines are then
    /// written by their callers).
    private func startWriterLocked() -> Bool {
        if writerRunning { return true }
        var thread = pthread_t()
        let me = Unmanaged.passUnretained(self).toOpaque()   // `standardError` lives for the process
        guard pthread_create(&thread, nil, { raw in
            Unmanaged<LogOutput>.fromOpaque(raw!).takeUnretainedValue().runWriter()
            return nil
        }, me) == 0 else { return false }
        pthread_detach(thread)
        writerRunning = true
        return true
    }

    private func runWriter() {
        while true {
            pthread_mutex_lock(mutex)
            while pending.isEmpty { pthread_cond_wait(lineArrived, mutex) }
            // Let the lines of the next 50 ms join this write, unless they fill `soon` first.
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)   // the condition's clock
            let nanoseconds = Int(deadline.tv_nsec) + Self.delayNanoseconds
            deadline.tv_sec += nanoseconds / 1_000_000_000
            deadline.tv_nsec = nanoseconds % 1_000_000_000
            while pending.count < Self.soon, pthread_cond_timedwait(lineArrived, mutex, &deadline) != ETIMEDOUT {}
            writeOutLocked()   // unlocks `mutex`
        }
    }
}

/// A handler whose lines go through `LogOutput`: at warning and above they are written out at
/// once (with all before them), so a failure is in the log the moment it is logged.
struct BufferedLogHandler: LogHandler {
    var inner: any LogHandler
    /// `inner`'s format and label, for access lines written without it (`AccessLineFormatter`).
    let format: LogFormat
    let label: String

    var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { inner.metadataProvider }
        set { inner.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        inner.log(event: event)
        if event.level >= .warning { LogOutput.standardError.flush() }
    }
}

/// swift-log's text format, written into `LogOutput`.
struct BufferedStandardError: TextOutputStream, Sendable {
    mutating func write(_ string: String) { LogOutput.standardError.write(string) }
}

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#endif
