internal import ConcurrencyPrimitives
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An EventSource in Swift: GETs a `text/event-stream`, parses it as it arrives, and
/// reconnects with `Last-Event-ID` after the stream drops, as a browser does.
///
/// The bytes come from a `URLSessionDataDelegate` (`didReceive data` per chunk). On Linux,
/// FoundationNetworking has no `URLSession.bytes(for:)`, which is why mattt/EventSource 1.1.1
/// does not build here; the delegate API works on Linux and Apple platforms alike, keeps
/// https, proxies and the session configuration, and the parser stays a plain value type.
final class EventStreamConnection: Sendable {
    private let url: URL
    private let configuration: URLSessionConfiguration
    private let reconnectDelay: Duration?
    private let lastEventID: String?

    init(url: URL, configuration: URLSessionConfiguration, lastEventID: String?, reconnectDelay: Duration?) {
        self.url = url
        self.configuration = configuration
        self.reconnectDelay = reconnectDelay
        self.lastEventID = lastEventID
    }

    /// Connects, and reconnects, until `handle` returns false (done), an answer retrying
    /// cannot fix (a 4xx other than 408/429), or cancellation. The parser (and so the last
    /// event id and retry time) lives as long as the run, across its reconnects.
    func run(_ handle: (ServerSentEvent) throws -> Bool) async throws {
        var parser = ServerSentEventParser(lastEventID: lastEventID)
        while true {
            try Task.checkCancellation()
            parser.reset()
            var request = URLRequest(url: url)
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
            if let id = parser.lastEventID, !id.isEmpty { request.setValue(id, forHTTPHeaderField: "Last-Event-ID") }
            do {
                for try await part in Self.open(request, configuration: configuration) {
                    switch part {
                    case let .bytes(data):
                        for event in parser.consume(data) where try !handle(event) { return }
                    case let .rejected(status, body):
                        let problem = Problem(status: status, body: body)
                        if (400..<500).contains(status), status != 408, status != 429 {
                            throw ReactorClientError.problem(problem)
                        }
                    }
                }
            } catch let error as ReactorClientError {
                throw error
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // A dropped connection or a failed read: reconnect below.
            }
            try Task.checkCancellation()
            try await Task.sleep(for: reconnectDelay ?? .milliseconds(parser.retry ?? 3_000))
        }
    }

    enum Part {
        case bytes(Data)
        /// A status other than 200 (or a body that is no event stream), with its body.
        case rejected(status: Int, body: Data)
    }

    /// One GET: its body as it arrives. Ends when the response ends; cancelling the
    /// iteration cancels the request.
    static func open(_ request: URLRequest, configuration: URLSessionConfiguration) -> AsyncThrowingStream<
        Part, any Error
    > {
        AsyncThrowingStream { continuation in
            let delegate = Delegate(continuation)
            let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            let task = session.dataTask(with: request)
            continuation.onTermination = { _ in
                task.cancel()
                session.finishTasksAndInvalidate()
            }
            task.resume()
        }
    }

    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        private let continuation: AsyncThrowingStream<Part, any Error>.Continuation
        /// A refused answer's status and the start of its body. URLSession calls a delegate one
        /// call at a time, but not always on the same thread.
        private let rejected = Locked<(status: Int, body: Data)?>(nil)

        init(_ continuation: AsyncThrowingStream<Part, any Error>.Continuation) {
            self.continuation = continuation
        }

        func urlSession(
            _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
            completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
        ) {
            let http = response as? HTTPURLResponse
            let status = http?.statusCode ?? 0
            let type = http?.value(forHTTPHeaderField: "Content-Type")?.lowercased() ?? ""
            if status != 200 || !type.hasPrefix("text/event-stream") {
                rejected.withLock { $0 = (status: status == 200 ? 406 : status, body: Data()) }
            }
            completionHandler(.allow)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            let isRejected = rejected.withLock { rejected in
                guard rejected != nil else { return false }
                if rejected!.body.count < 64 * 1024 { rejected!.body.append(data) }
                return true
            }
            if !isRejected { continuation.yield(.bytes(data)) }
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            if let (status, body) = rejected.current { continuation.yield(.rejected(status: status, body: body)) }
            if let error {
                continuation.finish(throwing: error)
            } else {
                continuation.finish()
            }
        }
    }
}
