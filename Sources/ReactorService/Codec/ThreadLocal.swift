#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One object per thread, made on the thread's first use and released when the thread ends:
/// for scratch state reused by every call on a thread (`StateJSONWriter`), without a lock.
// why: wraps a pthread key (a C handle): each thread reaches only its own value (`make` captures nothing shared).
final class ThreadLocal<Value: AnyObject>: @unchecked Sendable {
    private var key = pthread_key_t()
    private let make: () -> Value

    init(_ make: @escaping () -> Value) {
        self.make = make
        #if canImport(Darwin)
        pthread_key_create(&key) { Unmanaged<AnyObject>.fromOpaque($0).release() }
        #else
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<AnyObject>.fromOpaque(pointer).release() }
        }
        #endif
    }

    var value: Value {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<Value>.fromOpaque(pointer).takeUnretainedValue()
        }
        let made = make()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }
}
