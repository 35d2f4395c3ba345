import MicroHTTP

/// The problem documents routes answer with, worded once.
enum Problems {
    static func body(_ error: RequestError) -> Response {
        switch error {
        case let .malformed(detail): return .problem(status: 400, detail: detail)
        case let .invalid(detail): return .problem(status: 422, detail: detail)
        case .unknownSession: return unknownSession
        }
    }

    static let unknownSession = Response.problem(
        status: 404, detail: "no session has this id: it was never issued, or it expired or was deleted")

    static let stopping = Response.problem(
        status: 503, detail: "the server is shutting down and takes no new work")
}
