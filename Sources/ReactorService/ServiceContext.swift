#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
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
    /// What /readyz asks; the store adds its own check (ReactorServer.addReadinessCheck).
    let readiness = Readiness()
    /// Counts and logs the streams closed for reading too slowly.
    var slowConsumers: SlowConsumers { SlowConsumers(metrics: metrics, logger: logger) }
    private let stopping = Locked(false)

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
