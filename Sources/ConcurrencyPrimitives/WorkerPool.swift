import Dispatch

/// Threads for work that blocks (a round trip to another node, or to a database that may not
/// answer for seconds), where a dispatch queue would not do: libdispatch runs its global queues
/// on about as many threads as there are cores, and adds one only after those have been blocked
/// for a while, so a few stuck jobs delay every other job queued behind them.
///
/// A job never waits for a thread while fewer than `maxThreads` run: one is started when every
/// thread is busy. Each thread runs `worker`, which takes its jobs with the `next` it is given,
/// in a loop, keeping what it likes between them (a connection); `next` returns nil when the
/// thread is to end: the pool is stopping (after its queued jobs), or, with `idleTimeout`, no
/// job came for that long.
package final class WorkerPool<Job: Sendable>: Sendable {
    private struct Queue {
        var jobs: [Job] = []
        var head = 0
        var stopping = false
        var threads = 0
        /// Threads waiting for a job, or about to.
        var idle = 0

        var isEmpty: Bool { head == jobs.count }
    }
    private let queue = Locked(Queue())
    /// Signalled, under `queue`'s lock, when a job arrives or a stop is asked for.
    private let changed = Condition()
    private let maxThreads: Int
    private let idleTimeout: Double?
    private let worker: @Sendable (_ next: () -> Job?) -> Void

    /// `threads`: started now (one keeps a first job from waiting for a thread to start).
    package init(
        maxThreads: Int, threads: Int = 0, idleTimeout: Double? = nil,
        worker: @escaping @Sendable (_ next: () -> Job?) -> Void
    ) throws(PlatformThreadError) {
        self.maxThreads = maxThreads
        self.idleTimeout = idleTimeout
        self.worker = worker
        for _ in 0..<min(threads, maxThreads) {
            queue.withLock { $0.threads += 1 }
            try PlatformThread.detached { [self] in worker(next) }
        }
    }

    /// Queues `job`; false when the pool is stopping (the job is not run).
    package func submit(_ job: Job) -> Bool {
        let (accepted, grow) = queue.withLock { queue in
            if queue.stopping { return (false, false) }
            queue.jobs.append(job)
            changed.signal()
            let grow = queue.jobs.count - queue.head > queue.idle && queue.threads < maxThreads
            if grow { queue.threads += 1 }
            return (true, grow)
        }
        if grow {
            do throws(PlatformThreadError) {
                try PlatformThread.detached { [self] in worker(next) }
            } catch {
                // No thread to be had (the process is out of them): the threads there are take the
                // job in turn; with none, a dispatch thread runs a worker, so no job waits forever.
                let none = queue.withLock { queue in
                    queue.threads -= 1
                    guard queue.threads == 0 else { return false }
                    queue.threads = 1  // the dispatch thread's worker
                    return true
                }
                if none { DispatchQueue.global().async { [self] in worker(next) } }
            }
        }
        return accepted
    }

    /// Ends the threads once the jobs queued are done; later jobs are refused.
    package func stop() {
        queue.withLock { queue in
            queue.stopping = true
            changed.broadcast()
        }
    }

    private func next() -> Job? {
        queue.withLock { $0.idle += 1 }
        let deadline = idleTimeout.map { Condition.Deadline.after(seconds: $0) }
        return queue.withLock(waitingOn: changed, until: { !$0.isEmpty || $0.stopping }, deadline: deadline) {
            queue, _ in
            queue.idle -= 1
            guard !queue.isEmpty else {
                queue.threads -= 1
                return nil
            }
            let job = queue.jobs[queue.head]
            queue.head += 1
            if queue.isEmpty {
                queue.jobs.removeAll(keepingCapacity: true)
                queue.head = 0
            }
            return job
        }
    }
}
