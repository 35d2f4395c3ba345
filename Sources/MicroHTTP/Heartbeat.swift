import Dispatch

/// Writes ": keep-alive\n\n" to every open stream at a fixed interval. Besides keeping
/// proxies from timing a stream out, the write finds clients that vanished without a FIN or
/// RST (a dead host, a dropped NAT entry); those that did close are the DisconnectWatcher's.
// why: wraps a libdispatch source (a C object, cancelled from any thread); not Sendable on Linux.
final class Heartbeat: @unchecked Sendable {
    static let frame = Frame(": keep-alive\n\n")
    private let timer: DispatchSourceTimer

    init(interval: Double, beat: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "MicroHTTP.heartbeat")
        timer = DispatchSource.makeTimerSource(queue: queue)
        let leeway = DispatchTimeInterval.milliseconds(max(1, Int(interval * 20)))  // 2 %
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: leeway)
        timer.setEventHandler(handler: beat)
        timer.resume()
    }

    func cancel() { timer.cancel() }
}
