import ConcurrencyPrimitives
import Dispatch
import Logging
import MicroHTTP

/// What happens after each routed request's handler, for operators: its request metrics, its
/// access-log line, and a notice when a limit turned it away.
struct RequestObserver: Sendable {
    let metrics: ServiceMetrics.RouteMetrics
    let accessLog: AccessLog?
    let route: String
    let limits: LimitNotices

    init(context: ServiceContext, method: HTTPMethod, route: String) {
        metrics = context.metrics.routeMetrics(method: method.rawValue, route: route)
        accessLog = context.configuration.accessLog ? AccessLog(logger: context.logger, route: route) : nil
        self.route = route
        limits = LimitNotices(context: context)
    }

    func observe(_ request: Request, _ reply: Reply, nanoseconds: UInt64) {
        let status: Int
        switch reply {
        case let .response(response): status = response.status
        case .eventStream: status = 200
        case .deferred: status = 0
        }
        if status != 0 { metrics.record(status: status, nanoseconds: nanoseconds) }
        if case let .response(response) = reply, LimitNotices.isLimitRefusal(response) {
            limits.hit("\(request.method.rawValue) \(route) refused: a limit was reached (\(status) with Retry-After)")
        }
        accessLog?.record(request, route: route, reply: reply, nanoseconds: nanoseconds)
    }
}

/// Logs a limit being hit at warning, at most once per 10 s per message, with how many times
/// it was hit since the last line: a full session table under load must not flood the log.
final class LimitNotices: Sendable {
    private let logger: Logger
    private weak let context: ServiceContext?
    private let state = Locked<[String: (last: UInt64, suppressed: Int)]>([:])
    private let interval: UInt64 = 10_000_000_000

    init(context: ServiceContext) {
        logger = context.logger
        self.context = context
    }

    /// A request turned away by a limit: 503 or 429 with `Retry-After`.
    static func isLimitRefusal(_ response: Response) -> Bool {
        (response.status == 503 || response.status == 429) && response.headers["Retry-After"] != nil
    }

    /// A stopping server's 503s (with `Retry-After` too) are no limit.
    func hit(_ message: String) {
        guard context?.isStopping == false else { return }
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
