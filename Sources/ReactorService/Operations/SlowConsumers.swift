import Logging
import MicroHTTP

/// A subscriber that reads too slowly has its stream closed once its queue passes the limit
/// (it may reconnect and resume): counted in `reactord_slow_consumers_dropped_total` and
/// logged at notice, one line per stream, with its reactor kind but no session id.
struct SlowConsumers: Sendable {
    let metrics: ServiceMetrics
    let logger: Logger

    func watch(_ stream: EventStream, kind: String) {
        let metrics = metrics
        let logger = logger
        stream.onClose { reason in
            guard reason == .overflow else { return }
            metrics.slowConsumersDropped.increment()
            logger.notice(
                "slow consumer dropped: its event stream's queue passed the limit",
                metadata: ["reactor": "\(kind)"])
        }
    }
}
