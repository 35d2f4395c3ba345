import CoreMetrics
import Prometheus

/// The service's metrics, made through swift-metrics against this server's own Prometheus
/// registry (not the process-wide bootstrap), so two servers in one process don't mix.
/// No label carries a session id.
final class ServiceMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    let sessions: Meter
    let subscribers: Meter
    let actions: CoreMetrics.Counter
    let eventsDelivered: CoreMetrics.Counter
    private let factory: PrometheusMetricsFactory

    init() {
        factory = PrometheusMetricsFactory(registry: registry)
        sessions = Meter(label: "reactord_sessions", factory: factory)
        subscribers = Meter(label: "reactord_subscribers", factory: factory)
        actions = CoreMetrics.Counter(label: "reactord_actions_total", factory: factory)
        eventsDelivered = CoreMetrics.Counter(label: "reactord_events_delivered_total", factory: factory)
        sessions.set(0)
        subscribers.set(0)
    }

    /// Request latency of one route, in a histogram labelled by method and route pattern.
    func requestTimer(method: String, route: String) -> CoreMetrics.Timer {
        CoreMetrics.Timer(
            label: "reactord_request_duration_seconds",
            dimensions: [("method", method), ("route", route)], factory: factory)
    }

    /// Prometheus text exposition format.
    func exposition() -> [UInt8] { registry.emitToBuffer() }
}
