import MicroHTTP
import ReactorStore

extension RouteTable {
    /// As `answer(afterCommitOf:_:_:)`, but the answer is made on another thread: a page of
    /// the action log, and above all its export (up to 64 MiB read and written), would hold
    /// every other client of libmicrohttpd's thread, or every commit of the journal's, meanwhile.
    static func answerOffThread(
        afterCommitOf hub: EventHub, _ context: ServiceContext,
        _ response: @escaping @Sendable (StoreError?) -> Response
    ) -> Reply {
        .deferred { responder in
            let answer: Journal.Completion = { failure in
                context.waitingWork.run { responder.respond(response(failure)) }
            }
            if context.persistence == nil { answer(nil) } else { hub.whenCommitted(answer) }
        }
    }

    /// A probe's answer (`/readyz`, `/healthz`), made on a thread of `context.waitingWork`'s
    /// probes: it may wait for the store (a second at most), and never behind a request's read.
    static func probeOffThread(_ context: ServiceContext, _ response: @escaping @Sendable () -> Response) -> Reply {
        .deferred { responder in context.waitingWork.probe { responder.respond(response()) } }
    }
}
