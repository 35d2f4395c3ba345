import ConcurrencyPrimitives
import Dispatch
import Logging
import MicroHTTP

/// What happens after each routed request's handler, for operators: its request metrics and its
/// access-log line.
struct RequestObserver: Sendable {
    let metrics: ServiceMetrics.RouteMetrics
    let accessLog: AccessLog?
    let route: String

    init(context: ServiceContext, method: HTTPMethod, route: String) {
        metrics = context.metrics.routeMetrics(method: method.rawValue, route: route)
        accessLog = context.configuration.accessLog ? AccessLog(logger: context.logger, route: route) : nil
        self.route = route
    }

    func observe(_ request: Request, _ reply: Reply, nanoseconds: UInt64) {
        let status: Int
        switch reply {
        case let .response(response): status = response.status
        case .eventStream: status = 200
        case .deferred: status = 0
        }
        if status != 0 { metrics.record(status: status, nanoseconds: nanoseconds) }
        accessLog?.record(request, route: route, reply: reply, nanoseconds: nanoseconds)
    }
}
