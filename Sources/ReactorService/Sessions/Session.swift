import ConcurrencyPrimitives
import ReactorCore
import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One reactor instance behind a server-issued id, as the routes see it whatever its type.
protocol Session: AnyObject, Sendable {
    /// The id's 128 bits; `id` is their text.
    var key: SessionKey { get }
    var id: String { get }
    var kind: String { get }
    /// The subject of the token that created it; nil when it was made without authentication.
    var owner: String? { get }
    var hub: EventHub { get }
    /// Decodes an action of this session's reactor; the returned closure runs it.
    func decodeAction(from decoder: any Decoder) throws -> ActionRun
    /// Releases the reactor, cancelling its effects, then ends the streams: with `event: end`
    /// and `reason` when the session is over, else with a plain close (clients resume).
    func end(reason: String?)
    /// Releases the reactor, cancelling its effects; the streams stay open until the hub ends.
    func release()
    /// Releases the reactor only if the session's version satisfies `condition`, checked in the
    /// same step (a DELETE's If-Match): `.applied` when released, `.stale`, or `.gone` when
    /// its reactor was let go already.
    func release(ifAt condition: Preconditions.Condition) -> ActionResult
    /// Releases the reactor and ends the hub to leave memory, when the session is idle since
    /// `cutoff` (no subscriber, no running effect, nothing left to write): true then. Atomic with
    /// actions: one that comes later finds no reactor, and its request looks the session up again.
    func unload(idleSince cutoff: Double) -> Bool
    /// The state's top-level field names, nil ones included (empty once the session ended).
    func stateFieldNames() -> Set<String>
}

/// Runs a decoded action when the session's version satisfies `ifMatch` (checked atomically
/// with running it). `keep`, for an action sent under an idempotency key, makes the answer to
/// keep from the state the action led to; it is written in the same transaction as the action's
/// change.
/// `source`, when the session keeps an action log: what its entry records of the action.
typealias ActionRun = (
    _ ifMatch: Preconditions.Condition?,
    _ keep: ((EventHub.Snapshot) -> StoredAnswer?)?, _ source: ActionSource?
) -> ActionResult

/// What running an action came to.
enum ActionResult {
    /// Applied: the state after its synchronous mutations (not committed yet).
    case applied(EventHub.Snapshot)
    /// Not applied: `If-Match` named another version.
    case stale
    /// Not applied: the session ended, or left memory, before it ran (look it up again).
    case gone

    var isGone: Bool {
        if case .gone = self { return true }
        return false
    }
}

/// What every session of one reactor kind shares: its name and what to do when a state does
/// not encode (one reference per session instead of a String and a closure: 32 bytes less
/// per session, the object no longer crossing malloc's 144-byte chunk).
final class SessionKind: Sendable {
    let name: String
    let onEncodingError: @Sendable (any Error) -> Void
    /// The action's fields the action log hides (`RedactedInActionLog`).
    let redactedFields: Set<String>

    init(name: String, redactedFields: Set<String> = [], onEncodingError: @escaping @Sendable (any Error) -> Void) {
        self.name = name
        self.redactedFields = redactedFields
        self.onEncodingError = onEncodingError
    }
}

/// A session of reactor type `R`: its state stream feeds the hub, encoded once per state.
// why: actions decoded by the route's decoder go into the reactor; Guarded rejects them: "'inout sending' parameter cannot be task-isolated".
final class ReactorSession<R: Reactor>: Session, @unchecked Sendable
where R.Action: Decodable, R.State: Encodable {
    let key: SessionKey
    var id: String { key.string }
    private let sessionKind: SessionKind
    var kind: String { sessionKind.name }
    let owner: String?
    let hub: EventHub
    // Serialises `send` with reading the state it produced, so the answer is that action's.
    private let lock = Mutex()
    private var reactor: R?
    /// Looked up once: `reactor.action` finds the reactor's storage by identity each time.
    private let actions: ActionSubject<R.Action>
    /// The reactor's state stream, which this session receives itself (see `Subscriber` below:
    /// no `sink`, whose Sink, lock, AnyCancellable and closures cost every session ~250 bytes).
    /// Guarded by `lock`; cancelled by `end`, which breaks the stream's hold on the session.
    private var subscription: (any Subscription)?
    private var ended = false

    /// `restoring`: the state a durable store kept, which the reactor starts from instead of
    /// its `initialState`.
    init(key: SessionKey, kind: SessionKind, owner: String?, reactor: R, hub: EventHub, restoring state: R.State? = nil)
    {
        self.key = key
        self.owner = owner
        sessionKind = kind
        self.hub = hub
        self.reactor = reactor
        if let state { reactor.restore(state) }
        actions = reactor.action
        reactor.state.subscribe(self)
        hub.goLive()
    }

    func decodeAction(from decoder: any Decoder) throws -> ActionRun {
        let action = try R.Action(from: decoder)
        return { self.perform(action, ifMatch: $0, keep: $1, source: $2) }
    }

    private func perform(
        _ action: R.Action, ifMatch: Preconditions.Condition?,
        keep: ((EventHub.Snapshot) -> StoredAnswer?)?, source: ActionSource?
    ) -> ActionResult {
        lock.lock()
        defer { lock.unlock() }
        guard reactor != nil else { return .gone }
        if let ifMatch, !Preconditions.holds(ifMatch, at: hub.latest.version) { return .stale }
        // Logged: its changes carry the cause that attributes them to its entry.
        let cause = source == nil ? 0 : hub.beginAction()
        guard keep != nil || cause != 0 else {
            actions.send(action)
            hub.touch()
            return .applied(hub.latest)
        }
        if cause == 0 { hub.holdWrites() }
        ChangeCause.with(cause) { actions.send(action) }
        hub.touch()
        let latest = hub.latest
        hub.releaseWrites(
            adding: keep?(latest), logging: cause == 0 ? nil : source, redacting: sessionKind.redactedFields)
        return .applied(latest)
    }

    func stateFieldNames() -> Set<String> {
        // Asked only by a `?fields=` subscribe that names a field the current JSON lacks: no cost per event.
        guard let state = lock.withLock({ reactor?.currentState }) else { return [] }
        return StateEncoding.fieldNames(of: state)
    }

    func end(reason: String?) {
        // The reactor goes first, under the lock: an action running now finishes and publishes
        // before the streams get `event: end`, and one that comes later finds no reactor. (Ending
        // the hub first let an action in flight be answered 200 while its event was dropped.)
        release()
        hub.end(reason: reason)
    }

    func unload(idleSince cutoff: Double) -> Bool {
        lock.lock()
        // The hub last: once it has ended, no action may find the reactor (its change would be dropped).
        guard let reactor, !reactor.hasRunningEffects, hub.endForUnload(idleSince: cutoff) else {
            lock.unlock()
            return false
        }
        releaseLocked()
        return true
    }

    func release() {
        lock.lock()
        releaseLocked()
    }

    func release(ifAt condition: Preconditions.Condition) -> ActionResult {
        lock.lock()
        guard reactor != nil else {
            lock.unlock()
            return .gone
        }
        let latest = hub.latest
        guard Preconditions.holds(condition, at: latest.version) else {
            lock.unlock()
            return .stale
        }
        releaseLocked()
        return .applied(latest)
    }

    /// Lets the reactor go; called with `lock` held, which it releases.
    private func releaseLocked() {
        let subscription = self.subscription
        self.subscription = nil
        ended = true
        reactor = nil
        lock.unlock()
        subscription?.cancel()
    }
}

extension ReactorSession: Subscriber {
    typealias Input = R.State
    typealias Failure = Never

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }

    func receive(subscription: any Subscription) {
        lock.lock()
        let refused = ended || self.subscription != nil
        if !refused { self.subscription = subscription }
        lock.unlock()
        if refused {
            subscription.cancel()
        } else {
            subscription.request(.unlimited)
        }
    }

    /// A new state, from the reactor's pipeline (serially): encoded once for every stream.
    func receive(_ state: R.State) -> Subscribers.Demand {
        do {
            hub.publish(try StateEncoding.encode(state))
        } catch {
            sessionKind.onEncodingError(error)
        }
        return .none
    }

    func receive(completion: Subscribers.Completion<Never>) {}
}
