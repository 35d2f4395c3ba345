import MicroHTTP
import ReactorStore

/// The problem documents routes answer with, worded once.
enum Problems {
    static func body(_ error: RequestError) -> Response {
        switch error {
        case let .malformed(detail): return .problem(status: 400, detail: detail)
        case let .invalid(detail): return .problem(status: 422, detail: detail)
        case .unknownSession: return unknownSession
        case let .session(error): return session(error)
        case let .refused(response): return response
        }
    }

    static func session(_ error: SessionLookupError) -> Response {
        switch error {
        case .unknown: return unknownSession
        case let .unrestorable(detail, _): return .problem(status: 409, detail: detail)
        case let .store(error): return store(error)
        case .heldElsewhere:
            return .problem(
                status: 503, detail: "another node holds this session and it has just moved; retry",
                headers: notApplied)
        case .memoryFull:
            return memoryFull
        case .beingDeleted:
            // Not marked for a forwarding node to send again: its holder still holds it, and
            // would get the same request back at once.
            return .problem(
                status: 503, detail: "a DELETE of this session waits for its commit; retry (404 once it is gone)",
                headers: HTTPHeaders([("Retry-After", "1")]))
        case .needsStore:
            // Asked again off libmicrohttpd's thread before any answer (RouteTable.offThread).
            return .problem(status: 503, detail: "the session could not be looked up; retry", headers: notApplied)
        }
    }

    /// Every place in memory holds a busy session (a subscriber, a running effect, a write).
    static let memoryFull = Response.problem(
        status: 503, detail: "every session in memory is busy (--max-sessions); retry",
        headers: notApplied)

    /// Marks a 503 given before anything of the request was done, which a forwarding node may
    /// send again through the store (`Forwarding`); any other 503 it relays as it is.
    static let notAppliedField = "Reactord-Not-Applied"
    private static let notApplied = HTTPHeaders([("Retry-After", "1"), (notAppliedField, "1")])

    /// The store could not make a change durable: nothing of the request was kept.
    static func store(_ error: StoreError) -> Response {
        switch error {
        case .full:
            return .problem(status: 507, detail: "\(error.detail); nothing of this request was stored")
        case .damaged:
            return .problem(status: 500, detail: "\(error.detail); nothing of this request was stored")
        case .unavailable, .notHeld, .cannotOpen:
            return .problem(
                status: 503, detail: "\(error.detail); nothing of this request was stored",
                headers: HTTPHeaders([("Retry-After", "1")]))
        case .outcomeUnknown:
            // Not a 503: a balancer re-sends those, and this one may have been applied.
            return .problem(
                status: 504,
                detail: "\(error.detail); read the session, or send the request again under the same "
                    + "Idempotency-Key, before retrying")
        }
    }

    /// The session exists, but was let go (after a failed commit, to come back from the store)
    /// each time this request found it.
    static let sessionInFlux = Response.problem(
        status: 503, detail: "the session is coming back from the store after a failed write; retry",
        headers: notApplied)

    static let unknownSession = Response.problem(
        status: 404, detail: "no session has this id: it was never issued, or it expired or was deleted")

    /// With `Retry-After`: behind a balancer, or with a durable store after the restart, the
    /// retry finds the session.
    static let stopping = Response.problem(
        status: 503, detail: "the server is shutting down and takes no new work; retry",
        headers: notApplied)
}
