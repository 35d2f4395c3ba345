import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// When and how often a ``ReactorClient`` tries a request again.
///
/// A request is retried when its answer may have gone missing or the server asked to come back:
/// a network error (connection refused, reset or closed before the whole answer, timeout), 502
/// (a proxy's: the server it sent the request to failed on the way), 503, 504, and a 409 with
/// `Retry-After` to a request that carries an `Idempotency-Key` (the first request with that key
/// is still running). Other answers, 4xx above all, are final.
///
/// Actions, `POST /sessions` and `DELETE /sessions/{id}` carry an `Idempotency-Key` that stays
/// the same across their retries, so a retry of a request that did run gets the stored answer
/// instead of running it again; `GET` requests are retried as they are.
///
/// The wait before retry `n` (0, 1, ...) is a random time between half and all of
/// `initialDelay · 2ⁿ`, capped at `maxDelay` (the jitter keeps clients that failed together
/// from retrying together). When the answer has `Retry-After` (in seconds), the wait is that,
/// capped at `maxDelay`, plus a random part of up to half the backoff.
public struct RetryPolicy: Sendable, Equatable {
    /// Retries after the first attempt (0: never retry). The default is 4.
    public var maxRetries: Int
    /// The backoff before the first retry; it doubles with each retry. The default is 200 ms.
    public var initialDelay: Duration
    /// The longest wait before a retry, `Retry-After` included. The default is 5 s.
    public var maxDelay: Duration

    /// A policy; the defaults are those of ``default``.
    public init(maxRetries: Int = 4, initialDelay: Duration = .milliseconds(200), maxDelay: Duration = .seconds(5)) {
        self.maxRetries = max(0, maxRetries)
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// 4 retries, 200 ms doubling, waits of at most 5 s: about 3 s of backoff in all when the
    /// server names no `Retry-After`.
    public static let `default` = RetryPolicy()

    /// No retries: every failure is thrown at once.
    public static let never = RetryPolicy(maxRetries: 0)

    /// The wait before retry `attempt` (0 for the first), `retryAfter` seconds when the server
    /// named them. `random` is in 0...1 (a parameter so that tests can pin it).
    func delay(attempt: Int, retryAfter: Double?, random: Double = Double.random(in: 0...1)) -> Duration {
        let cap = maxDelay.seconds
        let backoff = min(cap, initialDelay.seconds * pow(2, Double(min(attempt, 62))))
        let seconds =
            if let retryAfter {
                min(cap, max(0, retryAfter)) + backoff / 2 * random
            } else {
                backoff / 2 + backoff / 2 * random
            }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    /// Whether an answer with `status` is worth retrying: 502, 503 and 504; 409 only for a keyed
    /// request and with `Retry-After` (the key's first request is still running; other 409s,
    /// such as a damaged session's, will not change).
    static func retries(status: Int, keyed: Bool, hasRetryAfter: Bool) -> Bool {
        switch status {
        case 502, 503, 504: true
        case 409: keyed && hasRetryAfter
        default: false
        }
    }

    /// Whether a failure without a whole answer may succeed when tried again: the connection
    /// could not be made (refused), broke (reset, or closed with no answer or part of one), or
    /// timed out. A bad address, a TLS failure or a cancellation will not change by retrying.
    static func retries(transport error: any Error) -> Bool {
        guard let error = error as? URLError else { return false }
        switch error.code {
        case .timedOut, .cannotConnectToHost, .networkConnectionLost, .notConnectedToInternet,
            .badServerResponse, .cannotParseResponse, .zeroByteResource:
            return true
        case .unknown:
            // FoundationNetworking on Linux gives an answer cut short ("transfer closed with N
            // bytes remaining to read") no code of its own; Apple's gives networkConnectionLost.
            return true
        default:
            return false
        }
    }

    /// `Retry-After` in seconds (the delta form; the date form counts from now), nil when
    /// absent or unreadable.
    static func retryAfter(_ value: String?) -> Double? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Double(value), seconds.isFinite { return seconds }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return format.date(from: value).map { $0.timeIntervalSinceNow }
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
