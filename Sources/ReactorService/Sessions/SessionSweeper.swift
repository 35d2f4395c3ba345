import Dispatch

/// Keeps memory for the sessions in use, on a timer. With the memory store it removes sessions
/// idle past the TTL (no action and no subscriber). With a durable store it unloads sessions idle
/// past `--unload-after` (or the TTL, when shorter), writes the activity of sessions that are
/// only watched, and deletes in the store the sessions that expired there, without loading them.
/// Either way it forgets expired idempotency keys.
// why: wraps a libdispatch timer source (a C object), which corelibs-libdispatch does not mark Sendable.
final class SessionSweeper: @unchecked Sendable {
    private let timer: DispatchSourceTimer

    /// How often to look: a tenth of the shortest idle time that matters, between 50 ms and 5 s,
    /// so a session stays at most that much past it.
    static func interval(_ configuration: ServiceConfiguration, durable: Bool) -> Double {
        min(max((idleLimit(configuration, durable: durable) ?? 50) / 10, 0.05), 5)
    }

    /// After how long idle a loaded session leaves memory (nil: never, by time).
    static func idleLimit(_ configuration: ServiceConfiguration, durable: Bool) -> Double? {
        [configuration.sessionTTL, durable ? configuration.unloadAfter : .zero].filter { $0 > .zero }.min()?.inSeconds
    }

    init(context: ServiceContext) {
        let durable = context.persistence != nil
        let interval = Self.interval(context.configuration, durable: durable)
        let idleLimit = Self.idleLimit(context.configuration, durable: durable)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "reactord.session-sweeper"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        var lastCount = ProcessClock.now
        var lastTrim = ProcessClock.now
        timer.setEventHandler { [weak context] in
            guard let context else { return }
            // Expired idempotency keys go every few seconds, whatever the sweeps' pace.
            if ProcessClock.now - lastTrim >= 5 {
                lastTrim = ProcessClock.now
                context.idempotency.trim(through: context.persistence?.journal)
                // The memory store's log trims itself as it grows; a durable store's, in batches.
                if context.configuration.actionLogLength > 0, let journal = context.persistence?.journal {
                    let before = WallClock.now - context.configuration.actionLogAge.inSeconds
                    journal.write([.forgetLoggedActions(before: before, limit: 5000)]) { _ in }
                }
            }
            guard let persistence = context.persistence else {
                guard let idleLimit else { return }
                for session in context.sessions.removeIdle(since: ProcessClock.now - idleLimit) {
                    context.end(session, reason: "expired")
                }
                return
            }
            if let idleLimit {
                context.didUnload(
                    context.sessions.unloadIdle(since: ProcessClock.now - idleLimit),
                    counter: context.metrics.idleUnloads, persistence: persistence)
            }
            for session in context.sessions.loaded { session.hub.refreshStoredActivity() }
            persistence.deleteExpiredStored(from: context)
            // A shared store's count is everyone's: read again now and then (a count of a large table).
            if context.cluster != nil, ProcessClock.now - lastCount >= 10 {
                lastCount = ProcessClock.now
                if let stored = try? persistence.engine.sessionCount() { context.sessions.setStored(stored) }
            }
        }
        timer.resume()
    }

    func cancel() { timer.cancel() }
}
