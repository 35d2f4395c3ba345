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

    /// What `retry` answers, made on one of `context.waitingWork`'s threads, where it may wait
    /// for the store: for a request whose first attempt, on libmicrohttpd's thread, found its
    /// session not in memory (in a cluster finding it is a round trip to PostgreSQL, which a
    /// frozen database holds for seconds while every other client of that thread waits). Used as
    /// `attempt(false) ?? retryOffThread(context, attempt)`: the retry is made only when needed.
    static func retryOffThread(_ context: ServiceContext, _ retry: @escaping @Sendable (_ mayWait: Bool) -> Reply?)
        -> Reply
    {
        offThread(context) { retry(true) ?? .response(Problems.session(.needsStore)) }
    }

    /// What `make` answers, made on one of `context.waitingWork`'s threads when `readsStore` (the
    /// route reads the durable store beyond its session's lookup, for the reasons above), else here.
    static func answer(offThreadIf readsStore: Bool, _ context: ServiceContext, _ make: @escaping @Sendable () -> Reply)
        -> Reply
    {
        readsStore ? offThread(context, make) : make()
    }

    /// The reply `make` gives, made on one of `context.waitingWork`'s threads (an event stream is
    /// then opened on libmicrohttpd's).
    private static func offThread(_ context: ServiceContext, _ make: @escaping @Sendable () -> Reply) -> Reply {
        .deferred { responder in
            context.waitingWork.run {
                switch make() {
                case let .response(response): responder.respond(response)
                case let .deferred(work): work(responder)
                case let .eventStream(headers, open): responder.respond(eventStreamWith: headers, open: open)
                }
            }
        }
    }
}
