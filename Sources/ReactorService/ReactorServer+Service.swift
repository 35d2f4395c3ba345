import ConcurrencyPrimitives
import ServiceLifecycle

/// A ReactorServer is a swift-service-lifecycle `Service`: in a `ServiceGroup` it runs beside a
/// program's other services, and the group's graceful shutdown (its signals, or
/// `triggerGracefulShutdown()`) stops it as `stop()` does. The blocking `run()` (until SIGINT or
/// SIGTERM) stays for programs without a group.
extension ReactorServer: Service {
    /// Starts, waits for the group's graceful shutdown (or this task's cancellation), then stops
    /// gracefully, on a thread of its own (a stop blocks for up to `stopDeadline`), and returns.
    public func run() async throws {
        try start()
        try? await gracefulShutdown()  // returns at the shutdown, throws at a cancellation: either way, stop
        await withCheckedContinuation { (stopped: CheckedContinuation<Void, Never>) in
            let stopping: @Sendable () -> Void = {
                self.stop()
                stopped.resume()
            }
            if (try? PlatformThread.detached(stopping)) == nil { stopping() }  // no thread to be had: here
        }
    }
}
