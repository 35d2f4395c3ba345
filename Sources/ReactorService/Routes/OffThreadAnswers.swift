import Dispatch
import MicroHTTP
import ReactorStore

extension RouteTable {
    /// As `answer(afterCommitOf:_:_:)`, but the answer is made on a dispatch thread: a page of
    /// the action log, and above all its export (up to 64 MiB read and written), would hold
    /// every other client of libmicrohttpd's thread, or every commit of the journal's, meanwhile.
    static func answerOffThread(
        afterCommitOf hub: EventHub, _ context: ServiceContext,
        _ response: @escaping @Sendable (StoreError?) -> Response
    ) -> Reply {
        .deferred { responder in
            let answer: Journal.Completion = { failure in
                DispatchQueue.global().async { responder.respond(response(failure)) }
            }
            if context.persistence == nil { answer(nil) } else { hub.whenCommitted(answer) }
        }
    }

    /// An answer made on a dispatch thread, for work that may wait (a probe of the store).
    static func answerOffThread(_ response: @escaping @Sendable () -> Response) -> Reply {
        .deferred { responder in DispatchQueue.global().async { responder.respond(response()) } }
    }
}
