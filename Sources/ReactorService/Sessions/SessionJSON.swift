import MicroHTTP

/// `{"reactor":..,"session":..,"state":{..},"version":N}`, the answer of every route that
/// returns a session, written around the state's already encoded bytes into one buffer.
enum SessionJSON {
    // As bytes: appending a literal's `utf8` costs several times a copy of an array's.
    private static let reactorMember: [UInt8] = Array(#"{"reactor":"#.utf8)
    private static let sessionMember: [UInt8] = Array(#","session":""#.utf8)
    private static let stateMember: [UInt8] = Array(#"","state":"#.utf8)
    private static let versionMember: [UInt8] = Array(#","version":"#.utf8)

    /// The session document; `view`: its state reduced to those fields (`?fields=`).
    static func body(of session: any Session, _ snapshot: EventHub.Snapshot, view: FieldFilter? = nil) -> [UInt8] {
        let kind = session.kind
        let state = view.map { $0.apply(to: snapshot.stateJSON) } ?? snapshot.stateJSON
        var out: [UInt8] = []
        out.reserveCapacity(state.count + kind.utf8.count + 22 + 64)
        out.append(contentsOf: reactorMember)
        StateJSONEncoder.appendString(kind, into: &out)
        out.append(contentsOf: sessionMember)
        session.key.append(to: &out)  // base64url: nothing to escape
        out.append(contentsOf: stateMember)
        out.append(contentsOf: state)
        out.append(contentsOf: versionMember)
        StateJSONEncoder.appendUnsigned(snapshot.version, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The session as an answer, with its version (and view) as the entity tag (see `Preconditions`).
    static func response(
        of session: any Session, _ snapshot: EventHub.Snapshot, status: Int = 200, view: FieldFilter? = nil
    ) -> Response {
        var response = Response.json(body(of: session, snapshot, view: view), status: status)
        let tag = view.map { Preconditions.entityTag(snapshot.version, view: $0) }
        response.headers.add("ETag", tag ?? Preconditions.entityTag(snapshot.version))
        return response
    }
}
