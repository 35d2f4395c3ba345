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
    /// The action in the member `action` of `envelope` (`POST /action`), decoded by the fast
    /// decoder; nil when it declines (see `RequestJSONDecoder`).
    func decodeAction(
        in envelope: RequestJSONDecoder.TopLevelObject, userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout RequestJSONDecoder.IntegerMismatch?
    ) -> sending DecodedAction?
    /// The action that is the whole `body` (`POST /sessions/{id}/actions`), decoded by the fast
    /// decoder; nil when it declines (see `RequestJSONDecoder`).
    func decodeAction(
        body: [UInt8], userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout RequestJSONDecoder.IntegerMismatch?,
        syntaxProblem: inout RequestJSONDecoder.SyntaxProblem?
    ) -> sending DecodedAction?
    /// The action in `body` decoded by `JSONDecoder`, for a body the fast decoder declined (see
    /// `RequestDecoding.decodeDeclined`): the envelope's member `action` when `inEnvelope`, else
    /// the whole body.
    func decodeDeclinedAction(
        from body: [UInt8], inEnvelope: Bool, with decoder: JSONDecoder,
        integerMismatch: RequestJSONDecoder.IntegerMismatch?
    ) throws(RequestError) -> sending DecodedAction
    /// Runs an action this session decoded, when its version satisfies `ifMatch` (checked
    /// atomically with running it). `keep`, for an action sent under an idempotency key, makes the
    /// answer to keep from the state the action led to; it is written in the same transaction as
    /// the action's change. `source`, when the session keeps an action log: what its entry records
    /// of the action. The action goes into the reactor: the caller hands it over whole.
    func perform(
        _ action: sending DecodedAction, ifMatch: Preconditions.Condition?,
        keep: (@Sendable (EventHub.Snapshot) -> StoredAnswer?)?, source: ActionSource?
    ) -> ActionResult
    /// Releases the reactor, cancelling its effects, then ends the streams: with `event: end`
    /// and `reason` when the session is over, else with a plain close (clients resume).
    func end(reason: String?)
    /// Releases the reactor, cancelling its effects; the streams stay open until the hub ends.
    func release()
    /// Releases the reactor only if the session's version satisfies `condition`, checked in the
    /// same step (a DELETE's If-Match): `.applied` when released, `.stale`, or `.gone` when
    /// its reactor was let go already.
    func release(ifAt condition: Preconditions.Condition) -> ActionResult
    /// Releases the reactor, its effects cancelled, only if nothing used the session since
    /// `cutoff` (no action or read, no subscriber), checked in the same step: an action that
    /// comes after finds it gone. True when released (the session's TTL, which then removes it).
    func release(ifIdleSince cutoff: Double) -> Bool
    /// Releases the reactor and ends the hub to leave memory, when the session is idle since
    /// `cutoff` (no subscriber, no running effect, nothing left to write): true then. Atomic with
    /// actions: one that comes later finds no reactor, and its request looks the session up again.
    /// `closingStreams`: subscribers do not keep it, their streams close (`EventHub.endForUnload`).
    func unload(idleSince cutoff: Double, closingStreams: Bool) -> Bool
    /// The state's top-level field names, nil ones included (empty once the session ended).
    func stateFieldNames() -> Set<String>
}

/// An action a session decoded, for that session's `perform` alone. Not `Sendable` (a reactor's
/// actions need not be): it is the decoding's own, and goes into the reactor whole. (The action as
/// `Any`, not in a generic class: unspecialised code would look such a class up at each action.)
struct DecodedAction {
    fileprivate let action: Any
}

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
///
/// The reactor and the ends of its pipeline the session holds are reached only under the
/// session's lock (`held`): they go in whole when the session is made, and so does each action
/// the route decodes (`perform`), so the compiler checks that nothing else holds them.
final class ReactorSession<R: Reactor>: Session
where R: SendableMetatype, R.Action: Decodable & SendableMetatype, R.State: Encodable {
    let key: SessionKey
    var id: String { key.string }
    private let sessionKind: SessionKind
    var kind: String { sessionKind.name }
    let owner: String?
    let hub: EventHub

    /// The reactor and the ends of its pipeline, behind the lock that serialises `send` with
    /// reading the state it produced (so the answer is that action's).
    private let held: Guarded<HeldReactor>

    /// `restoring`: the state a durable store kept, which the reactor starts from instead of
    /// its `initialState`.
    init(
        key: SessionKey, kind: SessionKind, owner: String?, reactor: sending R, hub: EventHub,
        restoring state: sending R.State? = nil
    ) {
        self.key = key
        self.owner = owner
        sessionKind = kind
        self.hub = hub
        if let state { reactor.restore(state) }
        let reactorHeld = ReactorHeld(reactor, hub: hub, kind: kind)
        reactor.state.subscribe(reactorHeld)
        // A transform(state:) that delivers later (`debounce`, `receive(on:)`) has given no state
        // yet: until it does, the session is at `currentState` (its initial or restored state),
        // as ReactorKit's is. Its answer, first write and pulse counts start from that.
        if !hub.hasPublished { reactorHeld.publishUntilFirst(reactor.currentState) }
        held = Guarded(reactorHeld)
        hub.goLive()
    }

    func decodeAction(
        in envelope: RequestJSONDecoder.TopLevelObject, userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout RequestJSONDecoder.IntegerMismatch?
    ) -> sending DecodedAction? {
        // Made inside the closure: a `R.Action?` in this unspecialised code would cost a metadata
        // lookup at each action.
        envelope.decode("action", userInfo: userInfo, integerMismatch: &integerMismatch) {
            DecodedAction(action: try R.Action(from: $0))
        }
    }

    func decodeAction(
        body: [UInt8], userInfo: [CodingUserInfoKey: any Sendable],
        integerMismatch: inout RequestJSONDecoder.IntegerMismatch?,
        syntaxProblem: inout RequestJSONDecoder.SyntaxProblem?
    ) -> sending DecodedAction? {
        RequestJSONDecoder.decode(
            body, userInfo: userInfo, integerMismatch: &integerMismatch, syntaxProblem: &syntaxProblem
        ) { DecodedAction(action: try R.Action(from: $0)) }
    }

    func decodeDeclinedAction(
        from body: [UInt8], inEnvelope: Bool, with decoder: JSONDecoder,
        integerMismatch: RequestJSONDecoder.IntegerMismatch?
    ) throws(RequestError) -> sending DecodedAction {
        if inEnvelope {
            let envelope = try RequestDecoding.decodeDeclined(
                ActionEnvelope<R.Action>.self, from: body, with: decoder, integerMismatch: integerMismatch)
            return DecodedAction(action: envelope.action)
        }
        let whole = try RequestDecoding.decodeDeclined(
            ActionBody<R.Action>.self, from: body, with: decoder, integerMismatch: integerMismatch)
        return DecodedAction(action: whole.action)
    }

    func perform(
        _ action: sending DecodedAction, ifMatch: Preconditions.Condition?,
        keep: (@Sendable (EventHub.Snapshot) -> StoredAnswer?)?, source: ActionSource?
    ) -> ActionResult {
        held.withLock(moving: action) { held, action in
            guard held.hasReactor else { return .gone }
            if let ifMatch, !Preconditions.holds(ifMatch, at: hub.latest.version) { return .stale }
            // Used before it acts: the write its change queues carries this activity.
            hub.touch()
            // Logged: its changes carry the cause that attributes them to its entry.
            let cause = source == nil ? 0 : hub.beginAction()
            // The answer is the state the action's own run left: read before anything that
            // other threads queued meanwhile runs (an effect's value, a user change). (`send`
            // calls back once in every case.)
            var latest: EventHub.Snapshot?
            guard keep != nil || cause != 0 else {
                held.send(action.action) { latest = hub.latest }
                return .applied(latest ?? hub.latest)
            }
            if cause == 0 { hub.holdWrites() }
            ChangeCause.with(cause) {
                held.send(action.action) {
                    let snapshot = hub.latest
                    latest = snapshot
                    hub.releaseWrites(
                        adding: keep?(snapshot), logging: cause == 0 ? nil : source,
                        redacting: sessionKind.redactedFields)
                }
            }
            return .applied(latest ?? hub.latest)
        }
    }

    func stateFieldNames() -> Set<String> {
        // Asked only by a `?fields=` subscribe that names a field the current JSON lacks: no cost per
        // event. Read under the lock, as the state stays the reactor's.
        held.withLock { $0.stateFieldNames() } ?? []
    }

    func end(reason: String?) {
        // The reactor goes first, under the lock: an action running now finishes and publishes
        // before the streams get `event: end`, and one that comes later finds no reactor. (Ending
        // the hub first let an action in flight be answered 200 while its event was dropped.)
        release()
        hub.end(reason: reason)
    }

    func unload(idleSince cutoff: Double, closingStreams: Bool) -> Bool {
        held.withLock { held in
            // The hub last: once it has ended, no action may find the reactor (its change would be dropped).
            guard held.hasReactor, !held.hasRunningEffects,
                hub.endForUnload(idleSince: cutoff, closingStreams: closingStreams)
            else { return false }
            held.release()
            return true
        }
    }

    func release() {
        held.withLock { $0.release() }
    }

    func release(ifIdleSince cutoff: Double) -> Bool {
        held.withLock { held in
            guard held.hasReactor, hub.isIdle(since: cutoff) else { return false }
            held.release()
            return true
        }
    }

    func release(ifAt condition: Preconditions.Condition) -> ActionResult {
        held.withLock { held in
            guard held.hasReactor else { return .gone }
            let latest = hub.latest
            guard Preconditions.holds(condition, at: latest.version) else { return .stale }
            held.release()
            return .applied(latest)
        }
    }
}

/// What a session holds of its reactor, reached only under the session's lock. Not generic, so
/// that the lock's calls look up no type (unspecialised code, as a session's is, would look up a
/// generic one at each action); `ReactorHeld` is the one kind.
private class HeldReactor {
    /// False once the reactor was let go.
    var hasReactor: Bool { false }
    var hasRunningEffects: Bool { false }
    /// Sends an action of the reactor's `Action` type to it; `ownRunDone` as
    /// `ActionSubject.send(_:ownRunDone:)` calls it.
    func send(_ action: Any, ownRunDone: () -> Void) {}
    /// The current state's top-level field names; nil once the reactor was let go.
    func stateFieldNames() -> Set<String>? { nil }
    /// Lets the reactor go and ends its state stream. (Cancelling the stream takes only its
    /// gate's mutex, which is never held while waiting for the session's lock.)
    func release() {}
}

/// A session's reactor and the ends of its pipeline: its action subject, and its state stream,
/// which this receives itself (no `sink`, whose Sink, lock, AnyCancellable and closures cost every
/// session ~250 bytes), each state encoded once for every stream. The pipeline calls it under the
/// reactor's gate; the session, under its lock.
private final class ReactorHeld<R: Reactor>: HeldReactor, Subscriber where R.State: Encodable {
    typealias Input = R.State
    typealias Failure = Never

    /// The stream, taken as the session subscribes (while it is made); cancelled by `release`,
    /// which breaks the stream's hold on the hub. (One enum, not an optional and a flag: the
    /// object fits malloc's 64-byte chunk.)
    private enum Link {
        case waiting
        case subscribed(SubscriptionRef)
        case ended
    }

    private var reactor: R?
    /// Looked up once: `reactor.action` finds the reactor's storage by identity each time.
    private let actions: ActionSubject<R.Action>
    private let hub: EventHub
    private let kind: SessionKind
    private var link = Link.waiting

    init(_ reactor: R, hub: EventHub, kind: SessionKind) {
        self.reactor = reactor
        actions = reactor.action
        self.hub = hub
        self.kind = kind
    }

    override var hasReactor: Bool { reactor != nil }
    override var hasRunningEffects: Bool { reactor?.hasRunningEffects ?? false }

    override func send(_ action: Any, ownRunDone: () -> Void) {
        // `as!`, not `as?`: an `R.Action?` would cost a metadata lookup (and it is this kind's).
        actions.send(action as! R.Action, ownRunDone: ownRunDone)
    }

    override func stateFieldNames() -> Set<String>? {
        reactor.map { StateEncoding.fieldNames(of: $0.currentState) }
    }

    override func release() {
        let released = reactor
        reactor = nil
        let ending = link
        link = .ended
        if case let .subscribed(subscription) = ending { subscription.cancel() }
        // Its effects end now, also one that holds the reactor (and would keep it from going).
        released?.tearDown()
    }

    var combineIdentifier: CombineIdentifier { CombineIdentifier(self) }

    func receive(subscription: any Subscription) {
        guard case .waiting = link else { return subscription.cancel() }
        link = .subscribed(SubscriptionRef(subscription))
        subscription.request(.unlimited)
    }

    /// A new state, from the reactor's pipeline (serially): encoded once for every stream.
    func receive(_ state: R.State) -> Subscribers.Demand {
        publish(state, onlyIfFirst: false)
        return .none
    }

    /// `state` as the session's until the reactor gives its first.
    func publishUntilFirst(_ state: R.State) { publish(state, onlyIfFirst: true) }

    private func publish(_ state: R.State, onlyIfFirst: Bool) {
        do {
            hub.publish(try StateEncoding.encode(state), onlyIfFirst: onlyIfFirst)
        } catch {
            kind.onEncodingError(error)
        }
    }

    func receive(completion: Subscribers.Completion<Never>) {}
}

/// `{"session": ID, "action": {...}}` as `JSONDecoder` reads it for a session's `Action`: the
/// action from `superDecoder(forKey:)`, so a missing one is decoded from null.
private struct ActionEnvelope<Action: Decodable>: Decodable {
    let action: Action

    private enum CodingKeys: String, CodingKey { case session, action }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        _ = try container.decode(String.self, forKey: .session)
        // superDecoder reads a missing member as null: "missing field" is what the client needs.
        guard container.contains(.action) else {
            throw DecodingError.keyNotFound(
                CodingKeys.action, .init(codingPath: container.codingPath, debugDescription: "no action"))
        }
        action = try Action(from: container.superDecoder(forKey: .action))
    }
}

/// An action that is the whole body, as `JSONDecoder` reads it: from the body's decoder itself
/// (not `decode(Action.self)`, which has ways of its own for a few types at the top level).
private struct ActionBody<Action: Decodable>: Decodable {
    let action: Action

    init(from decoder: any Decoder) throws { action = try Action(from: decoder) }
}
