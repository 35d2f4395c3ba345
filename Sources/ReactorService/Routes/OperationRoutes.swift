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
        // `/` is the generic console (any registered kind, its actions and fields read from
        // /openapi.yaml), so a server of your own shows its reactors; the counter's demo page,
        // which only works where `counter` is registered, moved to /demo. /console stays an alias.
        let console = BundledResource.bytes(named: "console", extension: "html")
        let page = BundledResource.bytes(named: "index", extension: "html")
        for (path, bytes, name) in [("/", console, "console"), ("/console", console, "console"), ("/demo", page, "demo page")] {
            add(.GET, path) { _ in
                guard let bytes else { return .response(.problem(status: 500, detail: "the bundled \(name) is missing")) }
                return .response(Response(status: 200, headers: HTTPHeaders([("Content-Type", "text/html; charset=utf-8")]),
                                          body: bytes))
            }
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
