import Foundation
import MicroHTTP

extension RouteTable {
    /// `GET /sessions/{id}/events`: the session's state and pulses as Server-Sent Events.
    mutating func addEventRoute() {
        let context = context
        add(.GET, "/sessions/{id}/events") { request in
            guard !context.isStopping else { return .response(Problems.stopping) }
            let session: any Session
            switch context.session(request.pathParameters["id"] ?? "") {
            case let .success(found): session = found
            case let .failure(error): return .response(Problems.session(error))
            }
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
                .flatMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
            let retry = context.retryFrame
            let streamFilter = filter
            let maxAge = context.configuration.streamMaxAge
            return .eventStream(headers: HTTPHeaders()) { stream in
                session.hub.subscribe(stream, lastEventID: lastEventID, filter: streamFilter, retry: retry)
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
