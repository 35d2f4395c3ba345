internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#endif

/// The store's wake-ups: a connection of its own on a thread of its own, `LISTEN reactord`,
/// polling its socket. A lost connection is made again with backoff, then `.reconnected` tells
/// the service that anything may have been missed meanwhile.
final class PostgresListener: Sendable {
    static let channel = "reactord"

    private let connect: @Sendable () throws(PostgresError) -> PostgresConnection
    private let wake: @Sendable (StoreWakeup) -> Void
    private let stopped = Locked(false)
    private let thread = Locked<PlatformThread?>(nil)

    init(
        connect: @escaping @Sendable () throws(PostgresError) -> PostgresConnection,
        wake: @escaping @Sendable (StoreWakeup) -> Void
    ) {
        self.connect = connect
        self.wake = wake
    }

    /// Starts the thread; false when none can be made.
    @discardableResult
    func start() -> Bool {
        guard let started = try? PlatformThread.joinable({ [self] in run() }) else { return false }
        thread.withLock { $0 = started }
        return true
    }

    /// Stops the thread and waits for it (at most one poll interval).
    func stop() {
        stopped.withLock { $0 = true }
        if let running = thread.withLock({ running in
            defer { running = nil }
            return running
        }) {
            running.join()
        }
    }

    private var isStopped: Bool { stopped.current }

    private func run() {
        var connection: PostgresConnection?
        var backoff = 0.1
        var missed = false
        while !isStopped {
            guard let listening = connection else {
                do {
                    let fresh = try connect()
                    try fresh.execute("LISTEN \(Self.channel)")
                    connection = fresh
                    backoff = 0.1
                    if missed {
                        missed = false
                        wake(.reconnected)
                    }
                } catch {
                    missed = true
                    pause(backoff)
                    backoff = min(backoff * 2, 2)
                }
                continue
            }
            while let notification = listening.nextNotification() {
                if notification.channel == Self.channel, let wakeup = Self.parse(notification.payload) { wake(wakeup) }
            }
            var descriptor = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            // Short enough that `stop` is quick; a notification wakes the poll at once.
            let ready = poll(&descriptor, 1, 250)
            if ready < 0 && errno == EINTR { continue }
            if ready != 0 && !listening.consumeInput() {
                connection = nil
                missed = true
            }
        }
    }

    /// Sleeps `seconds` in slices, returning early when stopped.
    private func pause(_ seconds: Double) {
        var left = seconds
        while left > 0 && !isStopped {
            usleep(UInt32(min(left, 0.05) * 1_000_000))
            left -= 0.05
        }
    }

    /// A notification's payload must stay under 8,000 bytes; the events ride along when they fit
    /// in this much (their header line takes under 100).
    static let carriedLimit = 7_000

    /// A commit's events as they follow its `e` line: one `\n<seq> <pulse or -> <json>` each; ""
    /// when they would not fit, or a JSON holds a line break (reactord's encoders write none).
    static func carried(_ events: [StoredEvent]) -> String {
        var size = 0
        for event in events {
            size += 24 + (event.pulse?.utf8.count ?? 1) + event.json.count
            guard size <= carriedLimit, !event.json.contains(UInt8(ascii: "\n")) else { return "" }
        }
        var text = ""
        text.reserveCapacity(size)
        for event in events {
            text += "\n\(event.seq) \(event.pulse ?? "-") "
            text += String(decoding: event.json, as: UTF8.self)
        }
        return text
    }

    /// `e <seq> <sentAt> <id>` and the events `carried` writes, `d <reason> <id>` (the reason may
    /// hold spaces; ids never do) or `u <version>`. Read from the bytes: every node reads every
    /// commit's notification, its events' JSON included.
    static func parse(_ payload: String) -> StoreWakeup? {
        var payload = payload
        return payload.withUTF8 { bytes in parse(bytes[...]) }
    }

    private static func parse(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> StoreWakeup? {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        let parts = lines[0].split(separator: UInt8(ascii: " "), maxSplits: 3, omittingEmptySubsequences: false)
        switch parts.first.map(text) {
        case "e":
            guard parts.count == 4, let seq = UInt64(text(parts[1])), let sentAt = Double(text(parts[2])) else {
                return nil
            }
            var carried: [StoredEvent] = []
            for line in lines.dropFirst() {
                let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
                guard fields.count == 3, let eventSeq = UInt64(text(fields[0])) else {
                    carried = []  // not ours to guess: the table has them
                    break
                }
                carried.append(
                    StoredEvent(
                        seq: eventSeq, pulse: fields[1].elementsEqual("-".utf8) ? nil : text(fields[1]),
                        json: Array(fields[2])))
            }
            return .events(session: text(parts[3]), seq: seq, sentAt: sentAt, carried: carried)
        case "d":
            guard lines.count == 1 else { return nil }
            let rest = bytes.dropFirst(2)
            guard let space = rest.lastIndex(of: UInt8(ascii: " ")) else { return nil }
            return .ended(session: text(rest[(space + 1)...]), reason: text(rest[..<space]))
        case "u":
            guard parts.count == 2, let version = UInt64(text(parts[1])) else { return nil }
            return .user(version: version)
        default:
            return nil
        }
    }

    private static func text(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }
}
