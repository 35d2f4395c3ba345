import MicroHTTP

extension RouteTable {
    /// The global current user. Reading is open; writing needs the admin token.
    mutating func addUserRoutes() {
        let context = context
        add(.GET, "/user") { _ in .response(.json(Self.userJSON(context.currentUser.value))) }
        add(.PUT, "/user") { request in
            if let refusal = AdminAuthorization.check(request, token: context.adminToken) { return .response(refusal) }
            do throws(RequestError) {
                let user = try RequestDecoding.decode(User.self, from: request.body)
                guard !user.id.isEmpty else {
                    return .response(.problem(status: 422, detail: "field 'id' must not be empty"))
                }
                // Every session's streams are resumed together at the end: see batchingResumes.
                EventStream.batchingResumes { context.currentUser.send(user) }
                context.logger.info("current user set", metadata: ["user": "\(user.id)"])
                return .response(.json(Self.userJSON(user)))
            } catch {
                return .response(Problems.body(error))
            }
        }
        add(.DELETE, "/user") { request in
            if let refusal = AdminAuthorization.check(request, token: context.adminToken) { return .response(refusal) }
            EventStream.batchingResumes { context.currentUser.send(nil) }
            context.logger.info("current user cleared")
            return .response(Response(status: 204))
        }
    }

    /// The user as JSON, or `null` when none is set: the value of the global subject.
    private static func userJSON(_ user: User?) -> [UInt8] {
        guard let user else { return Array("null".utf8) }
        return JSONText.object([("id", JSONText.string(user.id)), ("name", JSONText.string(user.name))])
    }
}
