import MicroHTTP

extension RouteTable {
    private struct Target: Decodable { let session: String }

    /// `POST /action`: the action runs inline on this thread, serialised with the session's
    /// other work; the answer is the state after its synchronous mutations.
    mutating func addActionRoute() {
        let context = context
        add(.POST, "/action") { request in
            guard !context.isStopping else { return .response(Problems.stopping) }
            do throws(BodyError) {
                let target = try RequestDecoding.decode(Target.self, from: request.body)
                guard let session = context.store.session(target.session),
                      let snapshot = try session.perform(actionBody: request.body)
                else { return .response(Problems.unknownSession) }
                context.metrics.actions.increment()
                return .response(.json(SessionJSON.body(of: session, snapshot)))
            } catch {
                return .response(Problems.body(error))
            }
        }
    }
}
