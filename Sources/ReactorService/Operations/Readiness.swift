import ConcurrencyPrimitives
import MicroHTTP

/// One condition `/readyz` asks about: `nil` when it holds, else why not (the 503's detail).
/// Runs for each `/readyz`, off libmicrohttpd's threads, one check after the other: keep it
/// quick (a cached flag, a ping with a short timeout), since a probe waits for all of them.
public struct ReadinessCheck: Sendable {
    /// The check's name: the start of the 503's detail, and what a later check of the same
    /// name replaces.
    public let name: String
    /// `nil` when the condition holds, else why not.
    public let check: @Sendable () -> String?

    /// A check called `name` that runs `check` for each `/readyz`.
    public init(_ name: String, _ check: @escaping @Sendable () -> String?) {
        self.name = name
        self.check = check
    }
}

/// What `/readyz` answers from: listening, not shutting down, and every added check (the
/// store adds "store reachable"). `/healthz` says only that the process is alive.
final class Readiness: Sendable {
    private let checks = Locked<[ReadinessCheck]>([])
    private let listening = Locked(false)

    func add(_ check: ReadinessCheck) {
        checks.withLock { checks in
            checks.removeAll { $0.name == check.name }
            checks.append(check)
        }
    }

    func setListening(_ value: Bool) { listening.withLock { $0 = value } }

    /// `nil` when ready, else the first reason it is not.
    func notReadyReason(stopping: Bool) -> String? {
        if stopping { return "the server is shutting down" }
        if !listening.current { return "the server is not listening yet" }
        for check in checks.current {
            if let reason = check.check() { return "\(check.name): \(reason)" }
        }
        return nil
    }

    var names: [String] { ["listening"] + checks.current.map(\.name) }
}

extension RouteTable {
    mutating func addReadinessRoute() {
        let context = context
        // Checks may wait on the store (up to a second): off libmicrohttpd's thread.
        add(.GET, "/readyz") { _ in Self.probeOffThread(context) { Self.readiness(context) } }
    }

    private static func readiness(_ context: ServiceContext) -> Response {
        if let reason = context.readiness.notReadyReason(stopping: context.isStopping) {
            return .problem(status: 503, detail: "not ready: \(reason)", headers: HTTPHeaders([("Retry-After", "1")]))
        }
        let checks = context.readiness.names.map { ($0, JSONText.string("ok")) }
        return .json(
            JSONText.object([
                ("status", JSONText.string("ready")),
                ("checks", JSONText.object(checks)),
            ]))
    }
}

extension ReactorServer {
    /// Adds a condition `/readyz` (and the container's HEALTHCHECK) waits for, e.g. that the
    /// store is reachable. A check of the same name replaces the earlier one.
    public func addReadinessCheck(_ check: ReadinessCheck) {
        context.readiness.add(check)
    }
}
