/// A request's answer kept under its idempotency key, committed with the change the request
/// made, so that a repeat of the request is given this answer again instead of running twice.
/// A class: it goes from the request's thread through the session's write to the journal's, and
/// a copy of eight counted fields at each step cost more than the answer's own making.
package final class StoredAnswer: Sendable, Equatable {
    /// Whose key it is: the caller's subject, "" without authentication, or the admins' own
    /// (ReactorService's `IdempotentRequest.scope`).
    package let scope: String
    package let key: String
    /// What the request was (a digest of its method, route, session and body): a repeat with
    /// another request under the same key is refused.
    package let request: String
    package let status: Int
    /// The header fields given back with it, in order.
    package let headers: [Field]
    package let body: [UInt8]
    /// Seconds since 1970; after that it may be forgotten.
    package let expires: Double
    /// The session whose change it answers: it is kept only if that change is (a write the
    /// store refuses, a delete of a session used since, take their answers with them).
    package let session: String?
    /// The claim it replaces (its run's token, see `ClusterStore.claimAnswer`); nil when its key
    /// was not claimed.
    package let claim: String?

    /// A run's claim on the key (a shared store's placeholder row), not an answer: the key is
    /// running on some node, and there is nothing to replay yet. Written as a 409, which no kept
    /// answer is (only 2xx are kept).
    package var isClaim: Bool { status == Self.claimStatus }
    package static let claimStatus = 409

    package struct Field: Sendable, Equatable {
        package var name: String
        package var value: String

        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    package init(
        scope: String, key: String, request: String, status: Int, headers: [Field], body: [UInt8],
        expires: Double, session: String?, claim: String? = nil
    ) {
        self.scope = scope
        self.key = key
        self.request = request
        self.status = status
        self.headers = headers
        self.body = body
        self.expires = expires
        self.session = session
        self.claim = claim
    }

    package static func == (lhs: StoredAnswer, rhs: StoredAnswer) -> Bool {
        lhs === rhs
            || (lhs.scope == rhs.scope && lhs.key == rhs.key && lhs.request == rhs.request && lhs.status == rhs.status
                && lhs.headers == rhs.headers && lhs.body == rhs.body && lhs.expires == rhs.expires
                && lhs.session == rhs.session && lhs.claim == rhs.claim)
    }

    /// The header fields as one text column: `name: value` lines (reactord's own header values
    /// never hold a line break).
    var headerText: String { String(decoding: headerBytes, as: UTF8.self) }

    /// `headerText`'s UTF-8, made in one buffer.
    var headerBytes: [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 3 })
        for field in headers {
            text.append(contentsOf: field.name.utf8)
            text.append(UInt8(ascii: ":"))
            text.append(UInt8(ascii: " "))
            text.append(contentsOf: field.value.utf8)
            text.append(UInt8(ascii: "\n"))
        }
        return text
    }

    static func fields(fromText text: String) -> [Field] {
        text.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return Field(String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
        }
    }
}
