import MicroHTTP

/// HTTP preconditions on a session's version (RFC 9110 §13): its entity tag is `"<version>"`,
/// and a `?fields=` view's is `"<version>.<view>"`, the view's mark in 16 hexadecimal digits.
/// `If-Match` makes a change conditional on the version the client last saw (412 when it moved
/// on; a view's tag names the version it shows); `If-None-Match` makes a read answer 304 when the
/// client already has that version of that representation.
enum Preconditions {
    /// What an `If-Match` or `If-None-Match` field asks for.
    enum Condition: Equatable, Sendable {
        /// `*`: the session exists.
        case any
        /// One of these tags; `weakLeftOut`: `If-Match` also had weak ones, which never match.
        case tags([Tag], weakLeftOut: Bool = false)
        /// `If-None-Match`'s on a change: holds while the other does not (`*`: never, the
        /// session existing).
        indirect case not(Condition)
        /// `If-Match` and `If-None-Match` both.
        indirect case both(Condition, Condition)
    }

    /// A DELETE's condition: its `If-Match`, its `If-None-Match`, both, or nil. Throws the 400
    /// of a field that cannot be read.
    static func conditionOnDelete(of request: Request) throws(PreconditionError) -> Condition? {
        let ifMatch = try condition("If-Match", of: request)
        let ifNoneMatch = try condition("If-None-Match", of: request).map(Condition.not)
        switch (ifMatch, ifNoneMatch) {
        case let (both?, other?): return .both(both, other)
        case let (one?, nil), let (nil, one?): return one
        case (nil, nil): return nil
        }
    }

    /// An entity tag read: the version, and the mark of the view it came from (nil: the whole state).
    struct Tag: Equatable, Sendable {
        let version: UInt64
        let view: UInt64?
    }

    static func entityTag(_ version: UInt64) -> String {
        // Written digit by digit on the stack: interpolation costs ~500 instructions on every
        // answer, and a String made with room for 22 bytes is allocated even when it needs 3.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 22) { buffer in
            var digits = version
            var start = 21
            buffer[start] = UInt8(ascii: "\"")
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(digits % 10)
                digits /= 10
            } while digits > 0
            start -= 1
            buffer[start] = UInt8(ascii: "\"")
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[start...]), as: UTF8.self)
        }
    }

    /// The entity tag of `view` of the state at `version`.
    static func entityTag(_ version: UInt64, view: FieldFilter) -> String {
        let mark = String(viewMark(view), radix: 16)
        return "\"\(version).\(String(repeating: "0", count: 16 - mark.count))\(mark)\""
    }

    /// FNV-1a over the view's sorted field names, each ended by a zero byte.
    private static func viewMark(_ view: FieldFilter) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for name in view.fields {
            for byte in name.utf8 + [0] { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        }
        return hash
    }

    /// The field `name` of `request`, read; nil when absent. Throws a 400 naming the field when it
    /// is neither `*` nor a list of `"<version>"` or `"<version>.<view>"` tags (the quotes may be
    /// left out; weak `W/` ones are read too, and `If-Match`'s strong comparison then never
    /// matches them).
    static func condition(_ name: String, of request: Request) throws(PreconditionError) -> Condition? {
        guard let (first, count) = request.headers.first(name) else { return nil }
        // Field lines sent more than once are one list (RFC 9110, 5.3).
        let field = count == 1 ? first : request.headers.values(name).joined(separator: ", ")
        let text = field[...].trimmingSpaceAndTab()
        if text == "*" { return .any }
        let malformed = PreconditionError(
            response: .problem(
                status: 400,
                detail:
                    "\(name) must be * or entity tags as ETag sends them (\"<version>\", a view's "
                    + "\"<version>.<16 hex digits>\"), e.g. \(name): \"12\""))
        var tags: [Tag] = []
        var weakLeftOut = false
        var read = 0
        // Empty elements of the list are ignored (RFC 9110, 5.6.1); at least one tag is needed.
        for part in text.split(separator: ",") {
            var text = part.trimmingSpaceAndTab()
            if text.isEmpty { continue }
            read += 1
            let weak = text.hasPrefix("W/")
            if weak { text = text.dropFirst(2) }
            // Quoted as ETag sends it, or bare (`If-Match: 12`, as people type it); a version as
            // ETag writes it (up to 19 digits, no leading zero: tags compare byte for byte), then a
            // view's `.` and 16 hexadecimal digits, nothing else (UInt64("+5") would read a sign):
            // what openapi.yaml's pattern says.
            let quoted = text.count >= 2 && text.first == "\"" && text.last == "\""
            let tag = quoted ? text.dropFirst().dropLast() : text
            let dot = tag.firstIndex(of: ".")
            let digits = tag[..<(dot ?? tag.endIndex)]
            guard digits.count <= 19, digits == "0" || digits.first != "0", let version = UInt64(digits: digits)
            else { throw malformed }
            var view: UInt64?
            if let dot {
                let mark = tag[tag.index(after: dot)...]
                guard mark.count == 16, Self.all(mark, in: "0123456789abcdef") else { throw malformed }
                view = UInt64(mark, radix: 16)
            }
            // A weak tag never matches strongly: kept out of If-Match's list.
            if weak && name == "If-Match" {
                weakLeftOut = true
            } else {
                tags.append(Tag(version: version, view: view))
            }
        }
        guard read > 0 else { throw malformed }
        return .tags(tags, weakLeftOut: weakLeftOut)
    }

    private static func all(_ text: Substring, in allowed: String) -> Bool {
        text.utf8.allSatisfy { allowed.utf8.contains($0) }
    }

    /// Whether `If-Match`'s `condition` holds for a session at `version` (a view's tag names the
    /// version it shows).
    static func holds(_ condition: Condition, at version: UInt64) -> Bool {
        switch condition {
        case .any: return true
        case let .tags(tags, _): return tags.contains { $0.version == version }
        case let .not(other): return !holds(other, at: version)
        case let .both(first, second): return holds(first, at: version) && holds(second, at: version)
        }
    }

    /// Whether `If-None-Match`'s `condition` holds for `view` (nil: the whole state) of the state
    /// at `version`: only that representation's own tag matches.
    static func holds(_ condition: Condition, at version: UInt64, view: FieldFilter?) -> Bool {
        switch condition {
        case .any: return true
        case let .tags(tags, _): return tags.contains(Tag(version: version, view: view.map(viewMark)))
        case .not, .both: return false  // made for changes only (`conditionOnDelete`)
        }
    }

    private static func whyNot(_ condition: Condition?, at version: UInt64) -> String {
        switch condition {
        case let .both(first, second)?: return whyNot(holds(first, at: version) ? second : first, at: version)
        case .not(.any)?: return "If-None-Match: * holds only while the session does not exist, and it does"
        case .not?: return "If-None-Match named the version the session was at (it is at version \(version) now)"
        case .tags([], weakLeftOut: true)?:
            return "If-Match: a weak tag (W/\"...\") never matches (RFC 9110, 13.1.1); send the ETag as it "
                + "came, without W/ (the session is at version \(version) now)"
        default: return "If-Match: the session is at version \(version) now; read it, and try again on that version"
        }
    }

    /// 304 instead of `current`, the 200 the client already has. It keeps that body: libmicrohttpd
    /// sends none on a 304 but writes its length as Content-Length, which RFC 9110 §8.6 allows
    /// only as the 200's length (an empty body would be a Content-Length of 0).
    static func notModified(_ current: Response) -> Response {
        Response(status: 304, headers: HTTPHeaders([("ETag", current.headers["ETag"] ?? "")]), body: current.body)
    }

    /// 412: `condition` does not hold for the session as it is now (it moved on; or `If-Match` had
    /// only weak tags, which a proxy may have made of the ETag; or `If-None-Match` names its
    /// version); the problem document carries where it stands.
    static func failed(_ snapshot: EventHub.Snapshot, condition: Condition?) -> Response {
        var json = Array(#"{"type":"about:blank","title":"Precondition Failed","status":412,"detail":"#.utf8)
        StateJSONEncoder.appendString(whyNot(condition, at: snapshot.version), into: &json)
        json.append(contentsOf: #","version":"#.utf8)
        StateJSONEncoder.appendUnsigned(snapshot.version, into: &json)
        json.append(contentsOf: #","state":"#.utf8)
        json.append(contentsOf: snapshot.stateJSON)
        json.append(UInt8(ascii: "}"))
        var headers = HTTPHeaders([("Content-Type", "application/problem+json")])
        headers.add("ETag", entityTag(snapshot.version))
        return Response(status: 412, headers: headers, body: json)
    }
}

/// A precondition field that cannot be read: its 400.
struct PreconditionError: Error {
    let response: Response
}
