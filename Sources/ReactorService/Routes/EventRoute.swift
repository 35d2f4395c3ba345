import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import MicroHTTP

extension RouteTable {
    /// `GET /sessions/{id}/events`: the session's state and pulses as Server-Sent Events.
    mutating func addEventRoute() {
        let context = context
        add(.GET, "/sessions/{id}/events") { request in
            guard !context.isStopping else { return .response(Problems.stopping) }
            // EventSource sends no headers: the token may come as `?access_token=` (never logged).
            let principal: Principal?
            switch context.access.authenticate(request, queryToken: true) {
            case let .success(found): principal = found
            case let .failure(refusal): return .response(refusal.response)
            }
            let session: any Session
            switch context.session(request.pathParameters["id"] ?? "") {
            case let .success(found): session = found
            case let .failure(error): return .response(Problems.session(error))
            }
            if let refusal = context.access.authorize(session, for: principal) { return .response(refusal) }
            var filter: FieldFilter?
            if let fields = request.query["fields"] {
                let known = FieldFilter.fieldNames(of: session.hub.snapshot.stateJSON)
                do throws(FieldFilterError) {
                    do throws(FieldFilterError) {
                        filter = try FieldFilter(query: fields, knownFields: known)
                    } catch .unknown {
                        // Perhaps a field that is nil now, which the JSON leaves out: ask the State type.
                        filter = try FieldFilter(query: fields, knownFields: known.union(session.stateFieldNames()))
                    }
                } catch {
                    return .response(.problem(status: 400, detail: error.description))
                }
            }
            // An id that is not a number we issued is treated as no id: the stream starts afresh.
            let lastEventID = (request.headers["Last-Event-ID"] ?? request.query["lastEventId"])
                .flatMap { UInt64($0.trimmingWhitespace()) }
            let retry = context.retryFrame
            let streamFilter = filter
            let maxAge = context.configuration.streamMaxAge
            let slowConsumers = context.slowConsumers
            let access = context.access
            return .eventStream(headers: HTTPHeaders()) { stream in
                session.hub.subscribe(stream, lastEventID: lastEventID, filter: streamFilter, retry: retry)
                slowConsumers.watch(stream, kind: session.kind)
                access.endAtExpiry(stream, of: principal)
                // A plain close, no `event: end`: an EventSource reconnects and resumes.
                if maxAge > 0 {
                    DispatchQueue.global().asyncAfter(deadline: .now() + maxAge) { [weak stream] in
                        stream?.close()
                    }
                }
            }
        }
    }
}
