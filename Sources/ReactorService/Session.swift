import Foundation
import ReactorCore

/// One reactor instance behind a server-issued id, as the routes see it whatever its type.
protocol Session: AnyObject, Sendable {
    var id: String { get }
    var kind: String { get }
    var hub: EventHub { get }
    /// Decodes an action of this session's reactor; the returned closure runs it and gives
    /// the state after it, or `nil` once the session ended.
    func decodeAction(from decoder: any Decoder) throws -> () -> EventHub.Snapshot?
    /// Ends the streams with `event: end` and releases the reactor, cancelling its effects.
    func end(reason: String)
}

/// A session of reactor type `R`: its state stream feeds the hub, encoded once per state.
final class ReactorSession<R: Reactor>: Session, @unchecked Sendable
where R.Action: Decodable, R.State: Encodable {
    let id: String
    let kind: String
    let hub: EventHub
    // Serialises `send` with reading the state it produced, so the answer is that action's.
    private let lock = NSLock()
    private var reactor: R?
    /// Looked up once: `reactor.action` finds the reactor's storage by identity each time.
    private let actions: ActionSubject<R.Action>
    private var subscription: AnyCancellable?

    init(id: String, kind: String, reactor: R, hub: EventHub, onEncodingError: @escaping (any Error) -> Void) {
        self.id = id
        self.kind = kind
        self.hub = hub
        self.reactor = reactor
        actions = reactor.action
        subscription = reactor.state.sink { [hub] state in
            do {
                hub.publish(try StateEncoding.encode(state))
            } catch {
                onEncodingError(error)
            }
        }
        hub.goLive()
    }

    func decodeAction(from decoder: any Decoder) throws -> () -> EventHub.Snapshot? {
        let action = try R.Action(from: decoder)
        return { self.perform(action) }
    }

    private func perform(_ action: R.Action) -> EventHub.Snapshot? {
        lock.lock()
        defer { lock.unlock() }
        guard reactor != nil else { return nil }
        actions.send(action)
        hub.touch()
        return hub.snapshot
    }

    func end(reason: String) {
        // The reactor goes first, under the lock: an action running now finishes and publishes
        // before the streams get `event: end`, and one that comes later finds no reactor. (Ending
        // the hub first let an action in flight be answered 200 while its event was dropped.)
        lock.lock()
        let subscription = self.subscription
        self.subscription = nil
        reactor = nil
        lock.unlock()
        hub.end(reason: reason)
        subscription?.cancel()
    }
}
