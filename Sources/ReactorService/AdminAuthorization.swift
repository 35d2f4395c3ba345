import MicroHTTP

/// `Authorization: Bearer <token>` for the writes to the global user.
enum AdminAuthorization {
    /// `nil` when the request carries the admin token; else the refusal to send.
    static func check(_ request: Request, token: String) -> Response? {
        guard let header = request.headers["Authorization"] else {
            return .problem(status: 401, detail: "this route needs 'Authorization: Bearer <admin token>'",
                            headers: HTTPHeaders([("WWW-Authenticate", #"Bearer realm="reactord""#)]))
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            return .problem(status: 401, detail: "the Authorization header must use the Bearer scheme",
                            headers: HTTPHeaders([("WWW-Authenticate", #"Bearer realm="reactord""#)]))
        }
        guard constantTimeEquals(Array(parts[1].utf8), Array(token.utf8)) else {
            return .problem(status: 403, detail: "the bearer token is not the admin token")
        }
        return nil
    }

    /// Compares without an early exit, so the time taken tells nothing of where they differ.
    static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        var difference: UInt8 = lhs.count == rhs.count ? 0 : 1
        for index in 0..<max(lhs.count, rhs.count) {
            let left = index < lhs.count ? lhs[index] : 0
            let right = index < rhs.count ? rhs[index] : 0
            difference |= left ^ right
        }
        return difference == 0
    }
}
