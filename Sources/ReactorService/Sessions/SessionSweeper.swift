import Dispatch

/// Removes sessions idle past the TTL (no action and no subscriber), on a timer. With a
/// durable store it also deletes stored sessions that expired unloaded, and writes the
/// activity of sessions that are only watched, so they do not expire across a restart.
final class SessionSweeper: @unchecked Sendable {
    private let timer: DispatchSourceTimer

    /// How often to look: a tenth of the TTL, between 50 ms and 5 s, so a session outlives
    /// its TTL by at most that.
    static func interval(ttl: Double) -> Double { min(max(ttl / 10, 0.05), 5) }

    init(context: ServiceContext) {
        let ttl = context.configuration.sessionTTL
        let interval = Self.interval(ttl: ttl)
        timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "reactord.session-sweeper"))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        timer.setEventHandler { [weak context] in
            guard let context else { return }
            for session in context.sessions.removeIdle(since: ProcessClock.now - ttl) {
                context.expire(session)
            }
            guard let persistence = context.persistence else { return }
            for session in context.sessions.loaded { session.hub.refreshStoredActivity() }
            persistence.deleteExpiredStored(from: context)
        }
        timer.resume()
    }

    func cancel() { timer.cancel() }
}
