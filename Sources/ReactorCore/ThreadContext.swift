#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Per-thread record of the serial gates this thread holds, innermost last.
///
/// A gate asks it "am I held by the calling thread?" (a send from inside the pipeline is
/// queued, never re-entered) and "does the calling thread hold any gate?" (then it must
/// not block waiting for another gate: that is how two reactors would deadlock).
final class ThreadContext {
    @exclusivity(unchecked) private(set) var held: ContiguousArray<ObjectIdentifier> = []
    /// Told of each `Pulse` encoded on this thread (`PulseRecording`).
    @exclusivity(unchecked) var pulseRecorder: (any PulseEncodingRecorder)?
    /// What the work this thread runs now comes from (`ChangeCause`).
    @exclusivity(unchecked) var cause: UInt64 = 0

    @inline(__always) func holds(_ gate: SerialGate) -> Bool {
        let id = ObjectIdentifier(gate)
        for element in held where element == id { return true }
        return false
    }

    var holdsAnyGate: Bool { !held.isEmpty }

    func push(_ gate: SerialGate) { held.append(ObjectIdentifier(gate)) }

    func pop(_ gate: SerialGate) {
        let id = ObjectIdentifier(gate)
        if held.last == id {
            held.removeLast()
        } else if let index = held.lastIndex(of: id) {
            held.remove(at: index)
        }
    }

    static var current: ThreadContext {
        if let pointer = pthread_getspecific(key) {
            return Unmanaged<ThreadContext>.fromOpaque(pointer).takeUnretainedValue()
        }
        let context = ThreadContext()
        pthread_setspecific(key, Unmanaged.passRetained(context).toOpaque())
        return context
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        #if canImport(Darwin)
        pthread_key_create(&key) { Unmanaged<ThreadContext>.fromOpaque($0).release() }
        #else
        pthread_key_create(&key) { pointer in
            if let pointer { Unmanaged<ThreadContext>.fromOpaque(pointer).release() }
        }
        #endif
        return key
    }()
}
