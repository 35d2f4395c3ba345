import Dispatch
import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension RouteTable {
    /// `GET /sessions/{id}/events`: the session's state and pulses as Server-Sent Events.
    mutating func addEventRoute() {
        let context = context
        add(.GET, "/sessions/{id}/events") { request in
            Self.openEvents(request, context, mayWait: false)
                ?? Self.retryOffThread(context) { Self.openEvents(request, context, mayWait: $0) }
        }
    }

    /// The stream of `GET /sessions/{id}/events`, or the refusal; nil when finding its session
    /// needs the store (see `retryOffThread`).
    private static func openEvents(_ request: Request, _ context: ServiceContext, mayWait: Bool) -> Reply? {
        guard !context.isStopping else { return .response(Problems.stopping) }
        // EventSource sends no headers: the token may come as `?access_token=` (never logged).
        let principal: Principal?
        switch context.access.authenticate(request, queryToken: true) {
        case let .success(found): principal = found
        case let .failure(refusal): return .response(refusal.response)
        }
        let id = request.pathParameters["id"] ?? ""
        var found: (source: StreamSource, reservation: SubscriberReservation)?
        // Reserved in the hub found, so that it stays in memory until the stream subscribes;
        // found again when it left between the two (then loaded, which takes a wait).
        for _ in 0..<3 where found == nil {
            switch Self.streamSource(id, context, mayWait: mayWait) {
            case let .success(source): found = source.hub.reserveSubscriber().map { (source, $0) }
            case .failure(.needsStore): return nil
            case let .failure(error): return .response(Problems.session(error))
            }
        }
        guard let (source, reservation) = found else { return .response(Problems.session(.memoryFull)) }
        if let refusal = context.access.authorize(owner: source.owner, for: principal) { return .response(refusal) }
        let filter: FieldFilter?
        switch FieldFilter.requested(
            by: request, stateJSON: source.hub.snapshot.stateJSON, stateFieldNames: source.stateFieldNames)
        {
        case let .success(found): filter = found
        case let .failure(error): return .response(error.response)
        }
        // An id that is not a number we issued (digits only, as openapi.yaml's EventID) is treated
        // as no id: the stream starts afresh.
        let lastEventID = (request.headers["Last-Event-ID"] ?? request.query["lastEventId"])
            .flatMap { UInt64(digits: $0.trimmingWhitespace()) }
        let retry = context.retryFrame
        let streamFilter = filter
        let maxAge = context.configuration.streamMaxAge.inSeconds
        let slowConsumers = context.slowConsumers
        let access = context.access
        @Sendable func started(_ stream: EventStream, on hub: EventHub) {
            slowConsumers.watch(stream, kind: source.kind)
            access.endAtExpiry(stream, of: hub, for: principal)
            // A plain close, no `event: end`: an EventSource reconnects and resumes.
            if maxAge > 0 {
                DispatchQueue.global().asyncAfter(deadline: .now() + maxAge) { [weak stream] in
                    stream?.close()
                }
            }
        }
        return .eventStream(headers: HTTPHeaders()) { stream in
            if source.hub.subscribe(
                stream, lastEventID: lastEventID, filter: streamFilter, retry: retry, reservation: reservation)
            {
                return started(stream, on: source.hub)
            }
            // Let go since it was found (a lease lost, a commit lost): found again on a thread
            // that may wait for the store; the same resume from the same store, so the stream
            // cannot tell.
            context.waitingWork.run {
                for _ in 0..<2 {
                    guard case let .success(again) = Self.streamSource(id, context) else { break }
                    if again.hub.subscribe(stream, lastEventID: lastEventID, filter: streamFilter, retry: retry) {
                        return started(stream, on: again.hub)
                    }
                }
                // Not found again (a store error, no room): closed as a lost lease closes it, and
                // the client reconnects (no `retry:` alone: see the wire contract).
                stream.close()
            }
        }
    }
}

/// Where a stream's events come from: the session's own hub, or in cluster mode a follower's
/// when another node holds the session.
private struct StreamSource: Sendable {
    let hub: EventHub
    let kind: String
    /// Whose session it is (nil: made without authentication), for SessionAccess.authorize.
    let owner: String?
    let stateFieldNames: @Sendable () -> Set<String>
}

extension RouteTable {
    /// `mayWait` false: `needsStore` where the store would be read (a session not in memory, or a
    /// follower's hub, which may need its first read).
    private static func streamSource(_ id: String, _ context: ServiceContext, mayWait: Bool = true) -> Result<
        StreamSource, SessionLookupError
    > {
        switch context.session(id, mayWait: mayWait) {
        case let .success(session):
            return .success(
                StreamSource(
                    hub: session.hub, kind: session.kind, owner: session.owner,
                    stateFieldNames: { session.stateFieldNames() }))
        case .failure(.heldElsewhere):
            guard let followers = context.cluster?.followers else { return .failure(.unknown) }
            guard mayWait else { return .failure(.needsStore) }
            return followers.hub(for: id).map { followed in
                StreamSource(hub: followed.hub, kind: followed.kind, owner: followed.owner) {
                    // The kind's State type, from its description: a nil field is absent from the JSON.
                    let description = context.registry.descriptions().first { $0.name == followed.kind }
                    return Set((description?.state?["properties"] as? [String: Any])?.keys.map { $0 } ?? [])
                }
            }
        case let .failure(error):
            return .failure(error)
        }
    }
}
