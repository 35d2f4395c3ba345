import Foundation
import MicroHTTP

/// Builds the router: every route timed into the request-latency histogram under its pattern.
struct RouteTable {
    private(set) var router = Router()
    let context: ServiceContext

    init(context: ServiceContext) {
        self.context = context
        addSessionRoutes()
        addActionRoute()
        addEventRoute()
        addUserRoutes()
        addOperationRoutes()
    }

    mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
        let timer = context.metrics.requestTimer(method: method.rawValue, route: pattern)
        router.add(method, pattern) { request in
            let start = DispatchTime.now().uptimeNanoseconds
            defer { timer.recordNanoseconds(Int64(DispatchTime.now().uptimeNanoseconds - start)) }
            return handler(request)
        }
    }
}
