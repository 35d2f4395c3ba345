import Foundation
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
            .response(Response(
                status: 200, headers: HTTPHeaders([("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]),
                body: context.metrics.exposition()))
        }
        let page = BundledResource.bytes(named: "index", extension: "html")
        add(.GET, "/") { _ in
            guard let page else { return .response(.problem(status: 500, detail: "the bundled demo page is missing")) }
            return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
                                      body: page))
        }
        // Generic: any registered kind, its actions and fields read from /openapi.yaml.
        let console = BundledResource.bytes(named: "console", extension: "html")
        add(.GET, "/console") { _ in
            guard let console else { return .response(.problem(status: 500, detail: "the bundled console is missing")) }
            return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
                                      body: console))
        }
        let template = BundledResource.bytes(named: "openapi", extension: "yaml").map { String(decoding: $0, as: UTF8.self) }
        add(.GET, "/openapi.yaml") { _ in
            guard let template else {
                return .response(.problem(status: 500, detail: "the bundled openapi.yaml is missing"))
            }
            return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "application/yaml")]),
                                      body: context.openAPISpec(template: template)))
        }
    }
}

enum BundledResource {
    static func bytes(named name: String, extension ext: String) -> [UInt8]? {
        guard let url = Bundle.module.url(forResource: name, withExtension: ext, subdirectory: "Resources"),
              let data = try? Data(contentsOf: url) else { return nil }
        return Array(data)
    }
}
