import ConcurrencyPrimitives
import MicroHTTP

#if canImport(Glibc)
import Glibc
#endif

/// Sends a request for a session another node holds to that node, and gives back its answer.
/// A pool of threads doing blocking I/O, each with a kept-alive connection per node: the
/// libmicrohttpd thread that received the request is never blocked (its connection is
/// suspended), so two nodes forwarding to each other cannot deadlock. A thread is busy for a
/// forward's whole round trip, the holder's commit included, so the pool grows while requests
/// wait for a thread (up to `maxThreads`): a fixed few would cap the requests in flight to the
/// holder, and with them its group commits.
final class Forwarder: Sendable {
    /// What became of a forwarded request.
    enum Outcome {
        /// The holder answered: its answer, to relay as it is.
        case answered(Response)
        /// Nothing was sent (the holder does not accept connections): safe to retry.
        case unreachable(String)
        /// Sent, but no whole answer came back: the holder may or may not have done it.
        /// `silent`: the holder kept the connection open without answering (alive, but stuck or
        /// slow), rather than closing it (it died, or is stopping).
        case unknown(String, silent: Bool)
    }

    struct Job {
        let method: HTTPMethod
        let path: String
        let headers: HTTPHeaders
        let body: [UInt8]
        let address: String
        /// The request's key was made for it just now: its first sending says so
        /// (`IdempotentRequest.freshForwardHeader`), and the holder need not look it up.
        let keyIsNew: Bool
        let completion: @Sendable (Outcome) -> Void
    }

    /// Marks a forwarded request, so that its receiver never forwards it again (a node that
    /// has just lost the session answers 503 and the client retries). Its value is the
    /// forwarding node's id (for `Placement`).
    static let marker = "Reactord-Forwarded"

    /// Each thread keeps a connection to each node it forwarded to.
    private let pool: WorkerPool<Job>

    /// `timeout`: seconds to wait for the holder's answer before calling the outcome unknown;
    /// `origin`: this node's id.
    init(maxThreads: Int, timeout: Double, origin: String) {
        let sender = Sender(timeout: timeout, origin: origin)
        do throws(PlatformThreadError) {
            // One thread from the start, so that a job never waits for none.
            pool = try WorkerPool(maxThreads: maxThreads, threads: 1) { next in
                var connections: [String: ForwardConnection] = [:]
                while let job = next() { job.completion(sender.send(job, over: &connections)) }
                for connection in connections.values { connection.close() }
            }
        } catch {
            preconditionFailure("cannot start the reactord.forward thread: error \(error.code)")
        }
    }

    func forward(_ job: Job) {
        if !pool.submit(job) { job.completion(.unreachable("this node is shutting down")) }
    }

    /// Ends the threads once the jobs queued are done.
    func stop() { pool.stop() }

    /// One forward's sending, on the pool's threads.
    private struct Sender: Sendable {
        let timeout: Double
        /// This node's id.
        let origin: String

        func send(_ job: Job, over connections: inout [String: ForwardConnection]) -> Outcome {
            let bytes = requestBytes(job, keyIsNew: job.keyIsNew)
            // A kept-alive connection the holder closed while it was idle is dropped unused. One that
            // fails once the request is on it, before any answer byte, is tried once more on a new
            // connection; when that one cannot even connect, the first attempt's fate is unknown
            // (the holder may have died while doing it).
            if let kept = connections.removeValue(forKey: job.address) {
                guard !kept.isClosedByPeer else {
                    kept.close()
                    return attempt(bytes, job.address, &connections)
                }
                switch kept.exchange(bytes, timeout: timeout) {
                case let .answered(response, keepAlive):
                    if keepAlive { connections[job.address] = kept } else { kept.close() }
                    return .answered(response)
                case .notSent:
                    kept.close()
                    return attempt(bytes, job.address, &connections)
                case let .failed(reason, answerStarted, timedOut):
                    kept.close()
                    if answerStarted { return .unknown(reason, silent: timedOut) }
                }
                // The first sending may have been done: its key must be looked up this time.
                switch attempt(requestBytes(job, keyIsNew: false), job.address, &connections) {
                case let .unreachable(reason):
                    return .unknown("the holder closed the connection and then \(reason)", silent: false)
                case let other: return other
                }
            }
            return attempt(bytes, job.address, &connections)
        }

        private func attempt(
            _ bytes: [UInt8], _ address: String,
            _ connections: inout [String: ForwardConnection]
        ) -> Outcome {
            let connection: ForwardConnection
            switch ForwardConnection.open(address, timeout: timeout) {
            case let .success(opened): connection = opened
            case let .failure(error): return .unreachable(error.reason)
            }
            switch connection.exchange(bytes, timeout: timeout) {
            case let .answered(response, keepAlive):
                if keepAlive { connections[address] = connection } else { connection.close() }
                return .answered(response)
            case let .notSent(reason):
                connection.close()
                return .unreachable(reason)
            case let .failed(reason, _, timedOut):
                connection.close()
                return .unknown(reason, silent: timedOut)
            }
        }

        private func requestBytes(_ job: Job, keyIsNew: Bool) -> [UInt8] {
            var head = "\(job.method.rawValue) \(job.path) HTTP/1.1\r\n"
            head += "Host: \(ForwardConnection.hostPort(job.address))\r\n"
            head += "\(Forwarder.marker): \(origin)\r\nContent-Length: \(job.body.count)\r\n"
            if keyIsNew { head += "\(IdempotentRequest.freshForwardHeader): 1\r\n" }
            for (name, value) in job.headers { head += "\(name): \(value)\r\n" }
            head += "\r\n"
            return Array(head.utf8) + job.body
        }
    }
}

extension Request {
    /// Sent by another node, which took this one for the session's holder.
    var isForwarded: Bool { headers[Forwarder.marker] != nil }
}
