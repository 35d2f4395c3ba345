import ConcurrencyPrimitives
import Dispatch
import ReactorStore

/// Whether the store answers, for `/readyz` and a cluster node's `/healthz`. At most one check
/// runs at a time, on a dispatch thread; a probe that comes while one runs waits for that one.
/// A probe waits at most `limit`: a store that stopped answering (PostgreSQL frozen) is a 503
/// within a second, not after a statement's own timeout, and probes do not pile up behind it.
final class StoreProbe: Sendable {
    private struct State {
        var running = false
        /// Checks finished so far, and what the last one found (nil: the store answered).
        var finished: UInt64 = 0
        var reason: String?
    }

    private let state = Locked(State())
    private let done = Condition()
    private let engine: any StoreEngine
    /// Seconds a probe waits for the check.
    private let limit: Int
    /// Seconds the journal's write in progress has taken so far (nil: none runs).
    private let writeInProgressFor: @Sendable () -> Double?

    /// A write running longer than this is a store that stopped taking writes (a frozen volume),
    /// which its reads, served from its cache, do not show.
    static let longestWrite = 2.0

    init(engine: any StoreEngine, limit: Int = 1, writeInProgressFor: @escaping @Sendable () -> Double? = { nil }) {
        self.engine = engine
        self.limit = limit
        self.writeInProgressFor = writeInProgressFor
    }

    /// nil when the store answered a one-row read, else why not: within about `limit` seconds.
    func unreachableReason() -> String? {
        if let problem = engine.fileProblem() { return problem }
        if let seconds = writeInProgressFor(), seconds > Self.longestWrite {
            return "the store has not finished a write for \(Int(seconds)) s"
        }
        let (awaited, start) = state.withLock { state in
            defer { state.running = true }
            return (state.finished + 1, !state.running)
        }
        if start { DispatchQueue.global().async { self.check() } }
        return state.withLock(
            waitingOn: done, until: { $0.finished >= awaited }, deadline: .after(seconds: Double(limit))
        ) { state, answered in
            answered ? state.reason : "the store did not answer within \(limit) s"
        }
    }

    private func check() {
        var reason: String?
        do throws(StoreError) {
            _ = try engine.loadUser()
        } catch {
            reason = "the store does not answer: \(error.detail)"
        }
        state.withLock { state in
            state.running = false
            state.finished += 1
            state.reason = reason
        }
        done.broadcast()
    }
}
