import Foundation
import Logging
import MicroHTTP
import ReactorCore

/// What every route shares: the sessions, the reactor kinds, the global user, the metrics.
final class ServiceContext: @unchecked Sendable {
    let configuration: ServiceConfiguration
    let store: SessionStore
    let registry = ReactorRegistry()
    let currentUser: CurrentValueSubject<User?, Never>
    let adminToken: String
    let metrics = ServiceMetrics()
    let logger: Logger
    let retryFrame: Frame
    let cors: CORSPolicy
    private let stopping = Locked(false)
    /// The rendered /openapi.yaml and the kinds it was rendered for.
    private let spec = Locked<(kinds: [String], bytes: [UInt8])?>(nil)

    init(configuration: ServiceConfiguration, adminToken: String, logger: Logger) {
        self.configuration = configuration
        self.adminToken = adminToken
        self.logger = logger
        store = SessionStore(capacity: configuration.maxSessions)
        currentUser = CurrentValueSubject(nil)
        retryFrame = EventFrames.retry(milliseconds: configuration.retryMilliseconds)
        cors = CORSPolicy(allowedOrigins: Set(configuration.corsOrigins))
    }

    var isStopping: Bool { stopping.current }

    /// The OpenAPI document for the kinds registered now; rendered once per set of kinds.
    func openAPISpec(template: String) -> [UInt8] {
        let kinds = registry.names
        if let cached = spec.withLock({ $0 }), cached.kinds == kinds { return cached.bytes }
        let text = OpenAPISpec.render(template: template, kinds: registry.descriptions(),
                                      defaultKind: configuration.defaultReactor ?? kinds.first)
        let bytes = Array(text.utf8)
        spec.withLock { $0 = (kinds, bytes) }
        return bytes
    }

    /// Marks the service as stopping; `true` only for the first caller.
    func beginStopping() -> Bool {
        stopping.withLock { stopping in
            defer { stopping = true }
            return !stopping
        }
    }

    /// Ends a session removed from the store, with `event: end` for its streams.
    func end(_ session: any Session, reason: String) {
        session.end(reason: reason)
        metrics.sessions.decrement()
    }
}
