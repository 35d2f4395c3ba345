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

    /// Compares without an early exit, and in a time that depends on the secret's length only:
    /// where `given` differs, and how long it is, change nothing in the work done. (Looping
    /// over the longer of the two would let a caller learn the token's length by timing.)
    static func constantTimeEquals(_ given: [UInt8], _ secret: [UInt8]) -> Bool {
        var difference = UInt(bitPattern: given.count ^ secret.count)
        for index in 0..<secret.count {
            let left = index < given.count ? given[index] : 0
            difference |= UInt(left ^ secret[index])
        }
        return difference == 0
    }
}
