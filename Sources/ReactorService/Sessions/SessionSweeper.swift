import ConcurrencyPrimitives
import Dispatch

/// Keeps memory for the sessions in use, on a timer. With the memory store it removes sessions
/// idle past the TTL (no action and no subscriber). With a durable store it unloads sessions idle
/// past `--unload-after` (or the TTL, when shorter), writes the activity of sessions that are
/// only watched, and deletes in the store the sessions that expired there, without loading them.
/// Either way it forgets expired idempotency keys.
final class SessionSweeper: Sendable {
    /// Set by `cancel()`: the next look does not happen. (One `asyncAfter` per look rather than a
    /// timer source, which corelibs-libdispatch does not mark Sendable.)
    private let cancelled = Locked(false)

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
        Self.look(
            at: .now() + interval, every: interval, idleLimit: Self.idleLimit(context.configuration, durable: durable),
            on: DispatchQueue(label: "reactord.session-sweeper"), context: context, cancelled: cancelled,
            lastCount: ProcessClock.now, lastTrim: -.infinity)  // keys trimmed and counted at the first look
    }

    /// One look at `deadline`, which schedules the next one `interval` after it (a fixed pace,
    /// whatever a look takes; at once, not once per pace missed, after a look that overran), until
    /// `cancel()` or the context is gone.
    private static func look(
        at deadline: DispatchTime, every interval: Double, idleLimit: Double?, on queue: DispatchQueue,
        context: ServiceContext, cancelled: Locked<Bool>, lastCount: Double, lastTrim: Double
    ) {
        queue.asyncAfter(deadline: deadline) { [weak context] in
            guard !cancelled.current, let context else { return }
            var lastCount = lastCount
            var lastTrim = lastTrim
            sweep(context, idleLimit: idleLimit, lastCount: &lastCount, lastTrim: &lastTrim)
            look(
                at: max(deadline + interval, .now()), every: interval, idleLimit: idleLimit, on: queue,
                context: context,
                cancelled: cancelled, lastCount: lastCount, lastTrim: lastTrim)
        }
    }

    private static func sweep(
        _ context: ServiceContext, idleLimit: Double?, lastCount: inout Double, lastTrim: inout Double
    ) {
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
            context.cluster?.touchWatched(context)
            context.didUnload(
                context.sessions.unloadIdle(since: ProcessClock.now - idleLimit),
                counter: context.metrics.idleUnloads, persistence: persistence)
        }
        // Idle past its TTL but kept in memory (an effect still runs): on one node it expires all
        // the same, as it would out of memory, and its effects end with it. (In a cluster, another
        // node's subscribers keep it in use without this node seeing them.)
        let ttl = context.configuration.sessionTTL
        let expiredBefore = ttl > .zero && context.cluster == nil ? ProcessClock.now - ttl.inSeconds : nil
        for session in context.sessions.loaded {
            // Idle first by the hub alone: the session's own lock is held through any action it runs.
            if let expiredBefore, session.hub.isIdle(since: expiredBefore), session.release(ifIdleSince: expiredBefore)
            {
                if context.takeForDeletion(session) { context.remove(session, reason: "expired") }
            } else {
                session.hub.refreshStoredActivity()
            }
        }
        persistence.deleteExpiredStored(from: context)
        // A shared store's count is everyone's: read again now and then (a count of a large table).
        if context.cluster != nil, ProcessClock.now - lastCount >= 10 {
            lastCount = ProcessClock.now
            if let stored = try? persistence.engine.sessionCount() { context.sessions.setStored(stored) }
        }
    }

    func cancel() { cancelled.withLock { $0 = true } }
}
