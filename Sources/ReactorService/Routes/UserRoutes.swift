import Dispatch
import MicroHTTP

extension RouteTable {
    /// The global current user. Reading is open; writing needs the admin token.
    ///
    /// A change reaches every session's reactor, one after another, inside `send`: with 10,000
    /// sessions that is tens of milliseconds of work. It runs on a serial queue of its own
    /// (changes keep their order), not on libmicrohttpd's thread, which meanwhile writes the
    /// new states to the streams as they are queued; the request is answered once every
    /// session has the change, as before.
    mutating func addUserRoutes() {
        let context = context
        let cors = context.cors
        let changes = DispatchQueue(label: "reactord.current-user")
        add(.GET, "/user") { _ in .response(.json(Self.userJSON(context.currentUser.value))) }
        add(.PUT, "/user") { request in
            if let refusal = AdminAuthorization.check(request, token: context.adminToken) { return .response(refusal) }
            do throws(RequestError) {
                let user = try RequestDecoding.decode(User.self, from: request.body)
                guard !user.id.isEmpty else {
                    return .response(.problem(status: 422, detail: "field 'id' must not be empty"))
                }
                let headers = cors.responseHeaders(for: request)
                return .deferred { responder in
                    changes.async {
                        context.currentUser.send(user)
                        context.logger.info("current user set", metadata: ["user": "\(user.id)"])
                        var response = Response.json(Self.userJSON(user))
                        for (name, value) in headers { response.headers.add(name, value) }
                        responder.respond(response)
                    }
                }
            } catch {
                return .response(Problems.body(error))
            }
        }
        add(.DELETE, "/user") { request in
            if let refusal = AdminAuthorization.check(request, token: context.adminToken) { return .response(refusal) }
            let headers = cors.responseHeaders(for: request)
            return .deferred { responder in
                changes.async {
                    context.currentUser.send(nil)
                    context.logger.info("current user cleared")
                    var response = Response(status: 204)
                    for (name, value) in headers { response.headers.add(name, value) }
                    responder.respond(response)
                }
            }
        }
    }

    /// The user as JSON, or `null` when none is set: the value of the global subject.
    private static func userJSON(_ user: User?) -> [UInt8] {
        guard let user else { return Array("null".utf8) }
        return JSONText.object([("id", JSONText.string(user.id)), ("name", JSONText.string(user.name))])
    }
}
