import ConcurrencyPrimitives

/// Threads for work that may wait on the store: the lookup of a session not in memory
/// (`RouteTable.retryOffThread`), a page of the action log, a probe of the store, and in a cluster
/// the claims of watched sessions nobody holds (`Cluster.take`; in a cluster the store is a round
/// trip to PostgreSQL, which a frozen database holds for seconds). A dispatch queue would not do:
/// libdispatch gives its global queues about as many threads as cores and adds one only after
/// they have been blocked a while, so a few jobs stuck on the database held up every probe
/// queued behind them (`WorkerPool`).
final class WaitingWork: Sendable {
    /// Reads of the store: restores and claims wait their turn for the restore lock, so with the
    /// database stuck these may all be waiting.
    private let reads: WorkerPool<@Sendable () -> Void>
    /// The health probes, apart: each waits at most a second, and never behind a read.
    private let probes: WorkerPool<@Sendable () -> Void>

    init() {
        do throws(PlatformThreadError) {
            reads = try WorkerPool(maxThreads: 64, idleTimeout: 10) { next in
                while let job = next() { job() }
            }
            probes = try WorkerPool(maxThreads: 8, idleTimeout: 10) { next in
                while let job = next() { job() }
            }
        } catch {
            preconditionFailure("cannot make the reactord.waiting-work pools: error \(error.code)")
        }
    }

    /// Runs `job` on one of the pool's threads.
    func run(_ job: @escaping @Sendable () -> Void) {
        _ = reads.submit(job)
    }

    /// Runs `probe` (`/readyz`, `/healthz`) on a thread of the probes' own.
    func probe(_ probe: @escaping @Sendable () -> Void) {
        _ = probes.submit(probe)
    }
}
