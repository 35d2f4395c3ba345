import JWSSignatures
import MicroHTTP

/// A request sent under an `Idempotency-Key`: whose key it is, the key, and a digest of the
/// request it names (its route, its session and its JSON body), which a repeat must match.
struct IdempotentRequest: Sendable {
    static let header = "Idempotency-Key"
    /// A forwarding node's own key for a request its client sent without one: the forward
    /// can then be retried without running twice (see `RouteTable.forward`).
    static let forwardHeader = "Reactord-Forward-Key"
    /// Beside `forwardHeader` on a forward's first sending, whose key the forwarding node has just
    /// made: nothing can be stored under it yet, so the holder does not look it up (in a cluster a
    /// lookup is a PostgreSQL round trip per forwarded action). A forward sent again goes without it.
    static let freshForwardHeader = "Reactord-Forward-Key-Fresh"
    static let replayedHeader = "Idempotent-Replayed"

    /// What a key may name. Both action routes are one kind: the same action of the same session.
    enum Kind: String {
        case action, createSession = "create-session", deleteSession = "delete-session"
        case setUser = "set-user", clearUser = "clear-user", fork

        /// Whether it runs with no session's holder to serialise its repeats across nodes.
        var isUnheld: Bool { self == .createSession || self == .setUser || self == .clearUser }
    }

    /// Whose key it is: see `scope(of:for:)`.
    let scope: String
    let key: String
    let digest: String
    /// A forwarding node's key, not the client's: kept briefly, and its replays are not marked.
    let isForwarders: Bool
    /// A forwarding node's key on its first sending: certainly not stored yet.
    let isFresh: Bool
    /// See `Kind.isUnheld`.
    let isUnheld: Bool

    /// The space of keys `kind`'s are in: the caller's subject with authentication, one shared
    /// space ("") without; the user routes' are the admins', apart from both and the same in
    /// either mode, so that a retry across a restart that turns authentication on is replayed.
    /// No subject is empty, and one that starts with `reservedMark` gets another in front:
    /// `adminScope` is no subject's.
    static func scope(of kind: Kind, for principal: Principal?) -> String {
        switch kind {
        case .setUser, .clearUser: return adminScope
        case .action, .createSession, .deleteSession, .fork:
            guard let subject = principal?.subject else { return "" }
            return subject.utf8.first == reservedMark.utf8.first ? reservedMark + subject : subject
        }
    }

    private static let reservedMark = "\u{1}"
    private static let adminScope = reservedMark + "admins"

    /// What a request says of its key.
    enum Reading {
        case none
        case key(IdempotentRequest)
        /// The 400 naming what is wrong with the key.
        case malformed(Response)
    }

    /// Whether `request` carries a key, its client's or a forwarding node's (well-formed or not).
    static func isSent(with request: Request) -> Bool { keyField(of: request) != nil }

    /// Whether admitting `request` looks its key up in the store: it has one, and not a
    /// forwarding node's fresh one (see `freshForwardHeader`).
    static func isLookedUp(_ request: Request) -> Bool {
        guard let field = keyField(of: request) else { return false }
        return !isFreshForward(request, isForwarders: field.isForwarders)
    }

    /// Whether the key is a forwarding node's, made just now (see `freshForwardHeader`).
    private static func isFreshForward(_ request: Request, isForwarders: Bool) -> Bool {
        isForwarders && request.headers[freshForwardHeader] != nil
    }

    /// The key's field as sent: the client's, else a forwarding node's; with how many times it is.
    private static func keyField(of request: Request) -> (value: String, count: Int, isForwarders: Bool)? {
        if let (value, count) = request.headers.first(header) { return (value, count, false) }
        if let (value, count) = request.headers.first(forwardHeader) { return (value, count, true) }
        return nil
    }

    /// `session` and `body`: read only when the request has a key.
    static func read(
        _ request: Request, scope: String, kind: Kind, session: @autoclosure () -> String = "",
        body: @autoclosure () -> ArraySlice<UInt8> = []
    ) -> Reading {
        guard let (sent, count, isForwarders) = keyField(of: request) else { return .none }
        let trimmed = sent[...].trimmingSpaceAndTab()
        let key = trimmed.utf8.count == sent.utf8.count ? sent : String(trimmed)
        guard count == 1 else {
            return .malformed(
                .problem(status: 400, detail: "header \(header) is sent \(count) times; send it once"))
        }
        guard (1...255).contains(key.utf8.count), isVisibleASCII(key) else {
            let got = firstInvisibleCharacter(in: key) ?? "got \(key.utf8.count) characters"
            return .malformed(
                .problem(
                    status: 400,
                    detail: "header \(header) must be 1 to 255 visible ASCII characters "
                        + "(no spaces), e.g. a UUID; \(got)"))
        }
        let session = session()
        let body = body()
        var text: [UInt8] = []
        text.reserveCapacity(kind.rawValue.utf8.count + session.utf8.count + body.count + 2)
        text.append(contentsOf: kind.rawValue.utf8)
        text.append(UInt8(ascii: "\n"))
        text.append(contentsOf: session.utf8)
        text.append(UInt8(ascii: "\n"))
        let bodyStart = text.count
        JSONWhitespace.appendStripped(body, to: &text)
        // Whitespace alone is no JSON (400), unlike an empty body (a route's defaults): another request.
        if text.count == bodyStart && !body.isEmpty { text.append(UInt8(ascii: " ")) }
        let digest = hexadecimal(SHA256.digest(text).prefix(16))
        let isFresh = isFreshForward(request, isForwarders: isForwarders)
        return .key(
            IdempotentRequest(
                scope: scope, key: key, digest: digest, isForwarders: isForwarders, isFresh: isFresh,
                isUnheld: kind.isUnheld))
    }
}

/// What the first character that is not visible ASCII is, and where; nil when there is none.
/// (Not a count of what was sent: a byte outside ASCII arrives as U+FFFD.)
private func firstInvisibleCharacter(in text: String) -> String? {
    for (offset, scalar) in text.unicodeScalars.enumerated() where !(0x21...0x7E).contains(scalar.value) {
        let code = String(scalar.value, radix: 16, uppercase: true)
        let what =
            switch scalar.value {
            case 0x20: "a space"
            case 0..<0x20, 0x7F: "a control character (0x\(code.count == 1 ? "0" : "")\(code))"
            default: "outside ASCII"
            }
        return "its character \(offset + 1) is \(what)"
    }
    return nil
}

/// RFC 9110's VCHAR in ASCII alone, on the bytes in place where the string has them.
private func isVisibleASCII(_ text: String) -> Bool {
    let isVisible: (UInt8) -> Bool = { (0x21...0x7E).contains($0) }
    return text.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(isVisible) } ?? text.utf8.allSatisfy(isVisible)
}

/// Two lowercase hexadecimal digits a byte, made in one buffer.
private func hexadecimal(_ bytes: ArraySlice<UInt8>) -> String {
    func digit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
    return String(unsafeUninitializedCapacity: bytes.count * 2) { buffer in
        for (index, byte) in bytes.enumerated() {
            buffer[2 * index] = digit(byte >> 4)
            buffer[2 * index + 1] = digit(byte & 0x0F)
        }
        return bytes.count * 2
    }
}

/// JSON text without the whitespace between its tokens: two bodies that differ only in layout
/// name the same request.
enum JSONWhitespace {
    static func appendStripped(_ json: ArraySlice<UInt8>, to out: inout [UInt8]) {
        let json = JSONScan.withoutByteOrderMark(json)
        var index = json.startIndex
        while index < json.endIndex {
            let start = index
            let byte = json[index]
            index += 1
            if byte == UInt8(ascii: "\"") {
                _ = JSONScan.skipString(json, &index)  // one left open runs to the end, kept as sent
                out.append(contentsOf: json[start..<index])
            } else if !JSONScan.isSpace(byte) {
                out.append(byte)
            }
        }
    }

    /// The bytes of the top-level object's member `name` (its value as sent, its key written
    /// with escapes or not), or nil when the body is not an object with that member.
    static func member(_ name: String, of body: [UInt8]) -> ArraySlice<UInt8>? {
        let json = JSONScan.withoutByteOrderMark(body[...])
        var index = json.startIndex
        func skipSpace() { JSONScan.skipSpace(json, &index) }
        func skipValue() -> Bool { JSONScan.skipValue(json, &index) }
        skipSpace()
        guard index < json.endIndex, json[index] == UInt8(ascii: "{") else { return nil }
        index += 1
        while true {
            skipSpace()
            guard index < json.endIndex, json[index] == UInt8(ascii: "\"") else { return nil }
            let keyStart = index
            guard skipValue() else { return nil }
            let key = json[keyStart..<index]
            let isWanted =
                key.contains(UInt8(ascii: "\\"))
                ? JSONScan.memberName(key) == name : key.dropFirst().dropLast().elementsEqual(name.utf8)
            skipSpace()
            guard index < json.endIndex, json[index] == UInt8(ascii: ":") else { return nil }
            index += 1
            skipSpace()
            let valueStart = index
            guard skipValue() else { return nil }
            if isWanted { return json[valueStart..<index] }
            skipSpace()
            guard index < json.endIndex, json[index] == UInt8(ascii: ",") else { return nil }
            index += 1
        }
    }
}
