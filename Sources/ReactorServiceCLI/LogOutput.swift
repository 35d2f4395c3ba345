internal import ConcurrencyPrimitives
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
final class LogOutput: Sendable {
    static let standardError = LogOutput(descriptor: STDERR_FILENO)

    private static let delaySeconds = 0.05
    /// Past this the writer is woken at once; a request thread still never writes.
    private static let soon = 256 << 10
    /// Past this a request thread writes the buffer out itself: the writer is stuck (a blocked
    /// pipe), and the log may not take all memory.
    private static let limit = 16 << 20

    private struct Buffers {
        var pending: [UInt8] = []
        /// The buffer last written out, emptied, to be `pending` next: a new buffer per batch was
        /// page faults (a fresh mapping, ~2,000 a second at 40k lines a second) under the lock.
        var spare: [UInt8] = []
        var writerRunning = false
    }

    private let descriptor: Int32
    private let buffers = Locked(Buffers())
    /// Signalled when `pending` gets its first line, and when it passes `soon`.
    private let lineArrived = Condition()
    /// Held for each write(2), taken while `buffers` is locked: batches leave in the order they
    /// were cut.
    private let writing = Mutex()

    private init(descriptor: Int32) {
        self.descriptor = descriptor
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
        enum Next { case done, signal, writeOut([UInt8]) }
        let next = buffers.withLock { buffers -> Next in
            let wasEmpty = buffers.pending.isEmpty
            buffers.pending.append(contentsOf: bytes)
            if buffers.pending.count >= Self.limit || !startWriter(&buffers) { return .writeOut(cut(&buffers)) }
            // At 40k lines a second `soon` fills in ~25 ms: the writer writes it, not this thread.
            if wasEmpty || (buffers.pending.count >= Self.soon && buffers.pending.count - bytes.count < Self.soon) {
                return .signal
            }
            return .done
        }
        switch next {
        case .done: break
        case .signal: lineArrived.signal()
        case let .writeOut(batch): writeOut(batch)
        }
    }

    /// Writes out what is buffered.
    func flush() {
        writeOut(buffers.withLock { cut(&$0) })
    }

    /// Cuts the buffer for a write: called with `buffers` locked, returns with `writing` taken.
    private func cut(_ buffers: inout Buffers) -> [UInt8] {
        var batch: [UInt8] = []
        swap(&batch, &buffers.pending)
        swap(&buffers.pending, &buffers.spare)
        writing.lock()
        return batch
    }

    /// Writes a batch `cut` made, releases `writing`, and keeps the emptied batch as the spare.
    private func writeOut(_ batch: [UInt8]) {
        var batch = batch
        batch.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0, errno == EINTR { continue }
                if written <= 0 { break }  // stderr closed or broken: the lines have nowhere to go
                offset += written
            }
        }
        writing.unlock()
        // Back as the spare (after `writing`: `buffers` is never locked while `writing` is held).
        batch.removeAll(keepingCapacity: true)
        buffers.withLock { buffers in
            if buffers.spare.capacity < batch.capacity { swap(&buffers.spare, &batch) }
        }
    }

    /// Starts the writer thread on first use; false when no thread can be made (lines are then
    /// written by their callers).
    private func startWriter(_ buffers: inout Buffers) -> Bool {
        if buffers.writerRunning { return true }
        // `standardError` lives for the process, and so does its writer.
        guard (try? PlatformThread.detached({ [self] in runWriter() })) != nil else { return false }
        buffers.writerRunning = true
        return true
    }

    private func runWriter() {
        while true {
            buffers.withLock(waitingOn: lineArrived, until: { !$0.pending.isEmpty }) { _, _ in }
            // Let the lines of the next 50 ms join this write, unless they fill `soon` first.
            let batch = buffers.withLock(
                waitingOn: lineArrived, until: { $0.pending.count >= Self.soon },
                deadline: .after(seconds: Self.delaySeconds)
            ) { buffers, _ in cut(&buffers) }
            writeOut(batch)
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
    /// `string` is one whole line from swift-log's text handler, its message and metadata as
    /// given: a line break or another control character in them (a client's or an admin's text)
    /// is written escaped, so that one log call stays one line and the log stays text.
    mutating func write(_ string: String) {
        var line = string
        let isClean = line.withUTF8 { bytes in
            (0..<max(bytes.count - 1, 0)).allSatisfy { Self.escape(bytes, at: $0) == nil }
        }
        guard isClean else { return LogOutput.standardError.write(bytes: Self.escaping(Array(line.utf8))) }
        LogOutput.standardError.write(line)
    }

    /// `line` with every byte sequence `escape` names replaced by its escape; a final newline stays.
    static func escaping(_ line: [UInt8]) -> [UInt8] {
        let end = line.last == UInt8(ascii: "\n") ? line.count - 1 : line.count
        var out: [UInt8] = []
        out.reserveCapacity(line.count + 16)
        line.withUnsafeBufferPointer { bytes in
            var index = 0
            while index < end {
                if let found = escape(bytes, at: index) {
                    out += Array(found.escape.utf8)
                    index += found.length
                } else {
                    out.append(bytes[index])
                    index += 1
                }
            }
        }
        return out + line[end...]
    }

    /// What the text at `index` is written as, when it may not be written as it is: `\n`, `\r`,
    /// `\t` and `\u{XX}` for the other C0 and C1 controls and DEL; `\u{2028}` and `\u{2029}`,
    /// which some readers take for line ends too (Python's `splitlines`, JavaScript); and `\\`
    /// for a backslash, so that a client's own `\n` cannot pass for an escaped line break.
    private static func escape(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> (length: Int, escape: String)? {
        let byte = bytes[index]
        switch byte {
        case UInt8(ascii: "\n"): return (1, "\\n")
        case UInt8(ascii: "\r"): return (1, "\\r")
        case UInt8(ascii: "\t"): return (1, "\\t")
        case UInt8(ascii: "\\"): return (1, "\\\\")
        case 0..<0x20, 0x7F: return (1, "\\u{\(String(byte, radix: 16, uppercase: true))}")
        case 0xC2 where index + 1 < bytes.count && (0x80...0x9F).contains(bytes[index + 1]):
            return (2, "\\u{\(String(bytes[index + 1], radix: 16, uppercase: true))}")
        case 0xE2 where index + 2 < bytes.count && bytes[index + 1] == 0x80 && (0xA8...0xA9).contains(bytes[index + 2]):
            return (3, bytes[index + 2] == 0xA8 ? "\\u{2028}" : "\\u{2029}")
        default: return nil
        }
    }
}

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#endif
