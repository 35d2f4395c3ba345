/// Who acts, as a verified token says: its subject (`sub`) and every claim it carries.
///
/// `register`'s two-argument factory receives it when a session is made, so a reactor can scope
/// what it does to its owner. It is `nil` when the server runs without authentication (no JWT
/// configured). A session brought back from a durable store after a restart gets its owner's
/// subject with no other claims: the store keeps the owner, not the token.
public struct Principal: Sendable, Hashable {
    /// The token's `sub`: the session's owner.
    public let subject: String
    /// Every claim of the token's payload (`sub`, `exp`, `iss`, your own), by name.
    public let claims: [String: ClaimValue]

    /// A principal with `subject` and `claims` (as a test or a custom factory makes one).
    public init(subject: String, claims: [String: ClaimValue] = [:]) {
        self.subject = subject
        self.claims = claims
    }

    /// The claim `name` when it is a string.
    public subscript(string name: String) -> String? {
        if case let .string(value)? = claims[name] { return value }
        return nil
    }
}

/// A JSON value of a token's claim.
public enum ClaimValue: Sendable, Hashable, Decodable {
    /// JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Any JSON number, as a `Double`.
    case number(Double)
    /// A string.
    case string(String)
    /// An array of values.
    case array([ClaimValue])
    /// An object, its values by name.
    case object([String: ClaimValue])

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([ClaimValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: ClaimValue].self))
        }
    }

    var number: Double? {
        if case let .number(value) = self { return value }
        return nil
    }
}
