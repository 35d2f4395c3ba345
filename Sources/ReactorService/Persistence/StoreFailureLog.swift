import ConcurrencyPrimitives
import Logging
import ReactorCore
import ReactorStore

/// Where store failures reach operators: clients read only a failure's `detail`, the log has
/// its cause (the store's location, the database's own message). A failure is logged when it
/// differs from the last one logged or 10 s after it, so a failing store under load does not
/// flood the log; the recovery once.
final class StoreFailureLog: Sendable {
    private let logger: Logger
    /// The failure last logged, and when.
    private let last = Locked<(text: String, at: Double)?>(nil)

    init(logger: Logger) {
        self.logger = logger
    }

    func failed(_ error: StoreError, _ doing: String) {
        let text = "\(error)"
        let now = ProcessClock.now
        let due: Bool = last.withLock { last in
            if let last, last.text == text, now - last.at < 10 { return false }
            last = (text, now)
            return true
        }
        if due {
            logger.warning(
                "the store failed \(doing); requests answer 503 (507 when full, 500 when damaged)",
                metadata: ["error": "\(text)"])
        }
    }

    /// A commit went through: logged once after failures.
    func succeeded() {
        let recovered: Bool = last.withLock { last in
            defer { last = nil }
            return last != nil
        }
        if recovered { logger.notice("the store works again") }
    }
}
