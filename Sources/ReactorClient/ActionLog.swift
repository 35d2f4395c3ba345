import Foundation

/// One page of a session's action log, from ``ReactorSession/actions(after:limit:)``.
public struct ActionLogPage: Sendable, Decodable {
    /// The entries, oldest first.
    public let entries: [LoggedActionEntry]
    /// Present when the page is full, so more may follow: pass it as `after` for the next page.
    public let next: UInt64?

    private enum CodingKeys: String, CodingKey { case entries = "actions", next }
}

/// One entry of a session's action log: an action a client sent, or a change that came without
/// one (an action's effect later on, the global user), with the versions it made.
public struct LoggedActionEntry: Sendable, Decodable {
    /// What made the change.
    public enum Cause: String, Sendable, Decodable {
        /// An action a client sent, with the versions its synchronous mutations made.
        case action
        /// Mutations an action's effect made after the action's own run (``LoggedActionEntry/origin`` names it).
        case effect
        /// The global user's change.
        case user
    }

    /// Its place in the session's log, from 1, without gaps.
    public let number: UInt64
    /// What made the change.
    public let cause: Cause
    /// For an effect, the ``number`` of the action it came from, when the server knows it.
    public let origin: UInt64?
    /// The first version (event id) it made; nil when it changed nothing.
    public let from: UInt64?
    /// The session's version after it.
    public let version: UInt64
    /// For an action, its JSON as sent, with the fields its reactor marks with
    /// `RedactedInActionLog` as `"[redacted]"`; nil for effects and the user.
    public let action: Data?
    /// The authenticated subject (the token's `sub`) that sent the action.
    public let subject: String?
    /// The `Idempotency-Key` the action was sent with.
    public let idempotencyKey: String?
    /// When it was applied (the server's clock, to the millisecond).
    public let time: Date

    /// ``action`` decoded as `type` (say, the app's own action enum); nil when there is none.
    /// Redacted fields are strings (`"[redacted]"`), which a type expecting another may refuse.
    public func decodeAction<A: Decodable>(_ type: A.Type = A.self) throws -> A? {
        guard let action else { return nil }
        return try JSONDecoder().decode(A.self, from: action)
    }

    private enum CodingKeys: String, CodingKey {
        case number, cause, origin, from, version, action, subject, idempotencyKey, time
    }

    /// Decodes an entry as the server writes it; the action stays raw JSON.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        number = try container.decode(UInt64.self, forKey: .number)
        cause = try container.decode(Cause.self, forKey: .cause)
        origin = try container.decodeIfPresent(UInt64.self, forKey: .origin)
        from = try container.decodeIfPresent(UInt64.self, forKey: .from)
        version = try container.decode(UInt64.self, forKey: .version)
        action = try container.decodeIfPresent(RawJSON.self, forKey: .action)?.data
        subject = try container.decodeIfPresent(String.self, forKey: .subject)
        idempotencyKey = try container.decodeIfPresent(String.self, forKey: .idempotencyKey)
        let text = try container.decode(String.self, forKey: .time)
        guard let time = Self.parseTime(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: .time, in: container,
                debugDescription: "not an RFC 3339 time: \(text)")
        }
        self.time = time
    }

    /// `2026-11-27T01:29:30.123Z` (fractions optional).
    static func parseTime(_ text: String) -> Date? {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = withFraction.date(from: text) { return date }
        return ISO8601DateFormatter().date(from: text)
    }
}

/// Any JSON value, kept as its (re-encoded) bytes.
private struct RawJSON: Decodable {
    let data: Data

    init(from decoder: any Decoder) throws {
        let value = try JSONValue(from: decoder)
        data = try JSONEncoder().encode(value)
    }
}
