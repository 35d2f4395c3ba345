import ConcurrencyPrimitives
import Dispatch
import Logging

/// Logs a limit being hit at warning, at most once per 10 s per message, with how many times
/// it was hit since the last line: a full session table under load must not flood the log.
/// Called where a limit refuses (the session table, the per-subject quota, the creation rate,
/// the connection limits), so that no other 503 or 429 reads as one.
final class LimitNotices: Sendable {
    private let logger: Logger
    private let state = Locked<[String: (last: UInt64, suppressed: Int)]>([:])
    private let interval: UInt64 = 10_000_000_000

    init(logger: Logger) {
        self.logger = logger
    }

    func hit(_ message: String) {
        let now = DispatchTime.now().uptimeNanoseconds
        let suppressed = state.withLock { state -> Int? in
            if let entry = state[message], now &- entry.last < interval {
                state[message]?.suppressed += 1
                return nil
            }
            let suppressed = state[message]?.suppressed ?? 0
            state[message] = (now, 0)
            return suppressed
        }
        guard let suppressed else { return }
        logger.warning("limit hit", metadata: ["what": "\(message)", "also_since_last_line": "\(suppressed)"])
    }
}
