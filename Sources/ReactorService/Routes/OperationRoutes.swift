import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension RouteTable {
    /// Health, metrics and the spec: what operators and tools read.
    mutating func addOperationRoutes() {
        let context = context
        add(.GET, "/healthz") { _ in
            guard !context.isStopping else { return .response(Problems.stopping) }
            // A cluster node is of no use without its shared store: it reports it here too, so a
            // balancer's health check takes it out while PostgreSQL is unreachable.
            guard context.cluster != nil, let probe = context.persistence?.probe else {
                return .response(Self.health(context))
            }
            return Self.probeOffThread(context) {
                guard let reason = probe.unreachableReason() else { return Self.health(context) }
                return .problem(status: 503, detail: reason, headers: HTTPHeaders([("Retry-After", "1")]))
            }
        }
        add(.GET, "/metrics") { _ in
            context.metrics.setCensus(context.sessions.census(), kinds: context.registry.names)
            context.metrics.storedSessions.set(Double(context.sessions.storedSessionCount ?? 0))
            return .response(
                Response(
                    status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]),
                    body: context.metrics.exposition()))
        }
        addReadinessRoute()
        // `/` is the generic console (any registered kind, its actions and fields read from
        // /openapi.yaml), so a server of your own shows its reactors; the counter's demo page,
        // which only works where `counter` is registered, moved to /demo. /console stays an alias.
        let console: [UInt8] = PackageResources.console_html
        let page: [UInt8] = PackageResources.index_html
        for (path, bytes) in [("/", console), ("/console", console), ("/demo", page)] {
            add(.GET, path) { _ in
                .response(
                    Response(
                        status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
                        body: bytes))
            }
        }
        add(.GET, "/favicon.ico") { _ in .response(Favicon.response) }
        let template = String(decoding: PackageResources.openapi_yaml, as: UTF8.self)
        add(.GET, "/openapi.yaml") { _ in
            .response(
                Response(
                    status: 200, headers: HTTPHeaders([("Content-Type", "application/yaml")]),
                    body: context.openAPISpec(template: template)))
        }
    }

    /// The process is alive: its session counts (stored ones with a durable store, loaded or
    /// not; else those in memory).
    private static func health(_ context: ServiceContext) -> Response {
        var fields = [
            ("status", JSONText.string("ok")),
            ("sessions", Array(String(context.sessions.sessionCount).utf8)),
            ("loaded_sessions", Array(String(context.sessions.loadedSessionCount).utf8)),
        ]
        if let stored = context.sessions.storedSessionCount {
            fields.append(("stored_sessions", Array(String(stored).utf8)))
        }
        return .json(JSONText.object(fields))
    }
}
