internal import CMicroHTTPD
internal import ConcurrencyPrimitives

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What keeps one client from shutting everyone out (slowloris): a deadline for each request
/// head, and a limit on the connections one address holds.
///
/// libmicrohttpd 0.9.75 has only an idle timeout, which a byte every few seconds resets. So each
/// connection's head deadline sits in a table indexed by its socket (`mhd_shim_heads_*`): set
/// when the acceptor accepts it, cleared when the access handler sees the head, set again when a
/// request completes (a keep-alive connection's next head), swept on the acceptor's thread at
/// every batch tick. A connection past its deadline has its socket shut down (never closed:
/// libmicrohttpd owns it and closes it once it sees the end). A request being handled, a
/// stream, a deferred reply have their head in: nothing here cuts them.
///
/// The per-address count lives here too, not in libmicrohttpd (whose limit cannot exempt
/// trusted proxies): the acceptor asks `admit` at each accept.
// why: owns the C head-deadline table (mhd_shim_heads_*, atomic per slot); its counts are under `lock`.
final class EdgeGuard: @unchecked Sendable {
    /// Milliseconds a head may take from the accept; 0: no deadline.
    private let headMilliseconds: Int64
    /// Milliseconds from a request's completion to the end of the next head on a keep-alive
    /// connection: its first byte may come up to the idle timeout later, then it has the head's time.
    private let nextHeadMilliseconds: Int64
    let connectionsPerIP: Int
    let trustedProxies: AddressRanges
    /// nil when there is neither a head deadline nor a per-address limit: nothing is tracked.
    private let table: UnsafeMutableRawPointer?

    private let lock = Mutex()
    // Guarded by `lock`: connections per address, and the address each counted socket holds.
    private var counts: [IPAddress: Int] = [:]
    private var counted: [Int32: IPAddress] = [:]

    /// Connections an address may open past its limit, each only to have its first request
    /// answered 429 (a client learns why); past these, a connection is closed at once.
    static let refusalSlots = 8

    init(configuration: HTTPServerConfiguration) {
        let head = configuration.headTimeout
        headMilliseconds = head > 0 ? max(1, Int64((min(head, 1e9) * 1000).rounded())) : 0
        nextHeadMilliseconds =
            headMilliseconds > 0
            ? headMilliseconds + Int64(max(0, min(configuration.connectionTimeout, 1_000_000_000))) * 1000 : 0
        connectionsPerIP = max(0, configuration.connectionsPerIP)
        trustedProxies = configuration.trustedProxies
        table = headMilliseconds > 0 || connectionsPerIP > 0 ? mhd_shim_heads_create(Self.tableCapacity()) : nil
    }

    deinit {
        if let table { mhd_shim_heads_destroy(table) }
    }

    /// Whether the access handler and completions must report to `headArrived`/`requestCompleted`.
    var isTracking: Bool { table != nil }

    /// Every descriptor the process may open once `start()` has raised its soft limit to the hard
    /// one (up to 4 Mi: 32 MiB of address space, only touched where sockets are): a connection's
    /// socket beyond it has no deadline.
    private static func tableCapacity() -> Int32 {
        guard let limit = OpenFileLimit.current() else { return 1 << 16 }
        return Int32(min(max(limit.soft, limit.hard, 1 << 10), 1 << 22))
    }

    enum Admission { case admit, refuse, drop }

    /// The acceptor's thread, for a new socket before it is handed over: counts it against its
    /// address and starts its head deadline.
    func admit(_ socket: Int32, address: UnsafePointer<sockaddr>) -> Admission {
        guard let table else { return .admit }
        var admission = Admission.admit
        if connectionsPerIP > 0, let key = IPAddress(address), !trustedProxies.contains(key) {
            admission = lock.withLock {
                let count = counts[key, default: 0]
                if count >= connectionsPerIP + Self.refusalSlots { return .drop }
                counts[key] = count + 1
                counted[socket] = key
                return count >= connectionsPerIP ? .refuse : .admit
            }
        }
        if admission == .drop { return .drop }
        let deadline = headMilliseconds > 0 ? mhd_shim_now_ms() + headMilliseconds : 0
        mhd_shim_heads_arm(table, socket, deadline | (admission == .refuse ? mhd_shim_head_refuse : 0))
        return admission
    }

    /// The socket was not handed over after all (libmicrohttpd refused and closed it): undone.
    /// Idempotent with `closed`, which libmicrohttpd may or may not have called.
    func handOverFailed(_ socket: Int32) {
        closed(socket)
    }

    /// A connection's CLOSED notice, before libmicrohttpd closes its socket.
    func closed(_ socket: Int32) {
        guard let table else { return }
        mhd_shim_heads_release(table, socket)
        guard connectionsPerIP > 0 else { return }
        lock.withLock {
            guard let key = counted.removeValue(forKey: socket) else { return }
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    /// The access handler's first call: the head is in, its deadline is off. Returns whether
    /// the connection is one an address opened past its limit (to be answered 429).
    @inline(__always)
    func headArrived(_ socket: Int32) -> Bool {
        guard let table else { return false }
        let was = mhd_shim_heads_set(table, socket, 0)
        return was > 0 && was & mhd_shim_head_refuse != 0
    }

    /// A request completed: a keep-alive connection's next head has its deadline from now.
    @inline(__always)
    func requestCompleted(_ socket: Int32) {
        guard let table, nextHeadMilliseconds > 0 else { return }
        _ = mhd_shim_heads_set(table, socket, mhd_shim_now_ms() + nextHeadMilliseconds)
    }

    /// The acceptor's thread: cuts the connections past their head deadline; returns how many.
    @discardableResult
    func sweep() -> Int {
        guard let table, headMilliseconds > 0 else { return 0 }
        return Int(mhd_shim_heads_sweep(table, mhd_shim_now_ms()))
    }

    /// Connections counted against `address` (tests).
    func connections(from address: String) -> Int {
        guard let key = IPAddress(address) else { return 0 }
        return lock.withLock { counts[key, default: 0] }
    }
}
