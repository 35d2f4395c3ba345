import ConcurrencyPrimitives

/// Threads for the parts of requests that may wait: a read of the store (in a cluster a round
/// trip to PostgreSQL, which a frozen database holds for seconds), a probe of it, a page of the
/// action log. A dispatch queue would not do: libdispatch gives its global queues about as many
/// threads as cores and adds one only after they have been blocked a while, so two requests
/// stuck on the database held up every probe queued behind them (`WorkerPool`).
final class WaitingWork: Sendable {
    private let pool: WorkerPool<@Sendable () -> Void>

    init() {
        do throws(PlatformThreadError) {
            pool = try WorkerPool(maxThreads: 64, idleTimeout: 10) { next in
                while let job = next() { job() }
            }
        } catch {
            preconditionFailure("cannot make the reactord.waiting-work pool: error \(error.code)")
        }
    }

    /// Runs `job` on one of the pool's threads.
    func run(_ job: @escaping @Sendable () -> Void) {
        _ = pool.submit(job)
    }
}
