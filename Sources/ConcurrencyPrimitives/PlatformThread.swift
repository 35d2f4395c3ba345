#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A thread of its own for a loop that blocks (poll, epoll_wait, a condition, a database call):
/// Foundation's `Thread` without Foundation. The thread holds `body` (and what it captures)
/// until `body` returns.
package struct PlatformThread: Sendable {
    /// Set for a thread to be joined; nil for a detached one.
    private let handle: pthread_t?

    /// Starts `body` on a detached thread: it ends on its own, nobody waits for it. Throws
    /// when no thread can be made (the process is out of threads or memory).
    @discardableResult
    package static func detached(_ body: @escaping @Sendable () -> Void) throws(PlatformThreadError) -> PlatformThread {
        let thread = try start(body)
        pthread_detach(thread)
        return PlatformThread(handle: nil)
    }

    /// Starts `body` on a thread that `join()` waits for.
    package static func joinable(_ body: @escaping @Sendable () -> Void) throws(PlatformThreadError) -> PlatformThread {
        PlatformThread(handle: try start(body))
    }

    /// Waits until the thread has ended; call once, and only on a joinable thread.
    package func join() {
        guard let handle else { preconditionFailure("join() on a detached thread") }
        pthread_join(handle, nil)
    }

    private final class Body: Sendable {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private static func start(_ body: @escaping @Sendable () -> Void) throws(PlatformThreadError) -> pthread_t {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()  // taken back by the thread
        #if canImport(Darwin)
        var thread: pthread_t?
        #else
        var thread = pthread_t()
        #endif
        let created = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, box)
        guard created == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            throw PlatformThreadError(code: created)
        }
        #if canImport(Darwin)
        return thread!
        #else
        return thread
        #endif
    }
}

/// pthread_create's error (EAGAIN: out of threads or memory).
package struct PlatformThreadError: Error, Sendable {
    package let code: Int32
}
