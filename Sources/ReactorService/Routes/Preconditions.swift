import MicroHTTP

/// HTTP preconditions on a session's version (RFC 9110 §13): its entity tag is `"<version>"`.
/// `If-Match` makes a change conditional on the version the client last saw (412 when it moved
/// on); `If-None-Match` makes a read answer 304 when the client already has that version.
enum Preconditions {
    /// What an `If-Match` or `If-None-Match` field asks for.
    enum Condition: Equatable {
        /// `*`: the session exists.
        case any
        /// One of these versions.
        case versions([UInt64])
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

    /// The field `name` of `request`, read; nil when absent. Throws a 400 naming the field when it
    /// is neither `*` nor a list of `"<version>"` tags (the quotes may be left out; weak `W/` ones
    /// are read as their version, and `If-Match`'s strong comparison then never matches them).
    static func condition(_ name: String, of request: Request) throws(PreconditionError) -> Condition? {
        guard let (first, count) = request.headers.first(name) else { return nil }
        // Field lines sent more than once are one list (RFC 9110, 5.3).
        let field = count == 1 ? first : request.headers.values(name).joined(separator: ", ")
        let text = field.trimmingWhitespace()
        if text == "*" { return .any }
        let malformed = PreconditionError(
            response: .problem(
                status: 400,
                detail:
                    "\(name) must be * or entity tags as ETag sends them (\"<version>\"), e.g. \(name): \"12\""))
        var versions: [UInt64] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            var tag = Substring(part.trimmingWhitespace())
            let weak = tag.hasPrefix("W/")
            if weak { tag = tag.dropFirst(2) }
            // Quoted as ETag sends it, or bare (`If-Match: 12`, as people type it); up to 19 digits,
            // nothing else (UInt64("+5") would read a sign): what openapi.yaml's pattern says.
            let quoted = tag.count >= 2 && tag.first == "\"" && tag.last == "\""
            let digits = quoted ? tag.dropFirst().dropLast() : tag
            guard !digits.isEmpty, digits.count <= 19,
                digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
                let version = UInt64(digits)
            else { throw malformed }
            // A weak tag never matches strongly: kept out of If-Match's list.
            if !(weak && name == "If-Match") { versions.append(version) }
        }
        return .versions(versions)
    }

    /// Whether `condition` holds for a session at `version`.
    static func holds(_ condition: Condition, at version: UInt64) -> Bool {
        switch condition {
        case .any: return true
        case let .versions(versions): return versions.contains(version)
        }
    }

    /// 304 instead of `current`, the 200 the client already has. It keeps that body: libmicrohttpd
    /// sends none on a 304 but writes its length as Content-Length, which RFC 9110 §8.6 allows
    /// only as the 200's length (an empty body would be a Content-Length of 0).
    static func notModified(_ current: Response, version: UInt64) -> Response {
        Response(status: 304, headers: HTTPHeaders([("ETag", entityTag(version))]), body: current.body)
    }

    /// 412: the session moved on; the problem document carries where it stands now.
    static func failed(_ snapshot: EventHub.Snapshot) -> Response {
        var json = Array(#"{"type":"about:blank","title":"Precondition Failed","status":412,"detail":"#.utf8)
        StateJSONEncoder.appendString(
            "If-Match: the session is at version \(snapshot.version) now; "
                + "read it, and try again on that version", into: &json)
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
