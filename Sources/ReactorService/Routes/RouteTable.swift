import Dispatch
import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Builds the router. Every route is timed into the request-latency histogram under its
/// pattern, answers CORS preflights, and marks its replies for allowed origins.
struct RouteTable {
    private(set) var router = Router()
    /// The same routes without that wrapping: for a request a route hands back to them
    /// (Forwarding's retry), which its first route already times, logs and marks.
    private(set) var handlers = Router()
    let context: ServiceContext
    private var methodsByPattern: [(pattern: String, methods: [HTTPMethod])] = []

    init(context: ServiceContext) {
        self.context = context
        addSessionRoutes()
        addActionRoute()
        addEventRoute()
        addUserRoutes()
        addHistoryRoutes()
        addOperationRoutes()
        addPreflights()
    }

    mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping Handler) {
        let observer = RequestObserver(context: context, method: method, route: pattern)
        let cors = context.cors
        handlers.add(method, pattern, handler)
        router.add(method, pattern) { request in
            let start = DispatchTime.now().uptimeNanoseconds
            let reply = cors.apply(to: handler(request), for: request)
            if case let .deferred(work) = reply {
                // Answered later (after the store's commit): observed when the answer is given.
                return .deferred { responder in
                    responder.onRespond = { answer in
                        observer.observe(request, answer, nanoseconds: DispatchTime.now().uptimeNanoseconds &- start)
                    }
                    work(responder)
                }
            }
            observer.observe(request, reply, nanoseconds: DispatchTime.now().uptimeNanoseconds &- start)
            return reply
        }
        if let index = methodsByPattern.firstIndex(where: { $0.pattern == pattern }) {
            methodsByPattern[index].methods.append(method)
        } else {
            methodsByPattern.append((pattern, [method]))
        }
    }

    private mutating func addPreflights() {
        let cors = context.cors
        for (pattern, methods) in methodsByPattern {
            router.add(.OPTIONS, pattern) { request in .response(cors.preflight(request, methods: methods)) }
        }
    }
}
