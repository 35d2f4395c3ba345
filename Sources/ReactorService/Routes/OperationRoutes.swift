#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MicroHTTP

extension RouteTable {
    /// Health, metrics and the spec: what operators and tools read.
    mutating func addOperationRoutes() {
        let context = context
        add(.GET, "/healthz") { _ in
            guard !context.isStopping else { return .response(Problems.stopping) }
            return .response(.json(JSONText.object([
                ("status", JSONText.string("ok")),
                ("sessions", Array(String(context.sessions.sessionCount).utf8)),
            ])))
        }
        add(.GET, "/metrics") { _ in
            context.metrics.setCensus(context.sessions.census(), kinds: context.registry.names)
            return .response(Response(
                status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]),
                body: context.metrics.exposition()))
        }
        addReadinessRoute()
        let page: [UInt8]? = PackageResources.index_html
        add(.GET, "/") { _ in
            guard let page else { return .response(.problem(status: 500, detail: "the bundled demo page is missing")) }
            return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
                                      body: page))
        }
        let spec: [UInt8]? = PackageResources.openapi_yaml
        add(.GET, "/openapi.yaml") { _ in
            guard let spec else { return .response(.problem(status: 500, detail: "the bundled openapi.yaml is missing")) }
            return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "application/yaml")]), body: spec))
        }
    }
}
