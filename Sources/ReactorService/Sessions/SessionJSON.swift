import MicroHTTP

/// `{"reactor":..,"session":..,"state":{..},"version":N}`, the answer of every route that
/// returns a session, written around the state's already encoded bytes into one buffer.
enum SessionJSON {
    static func body(of session: any Session, _ snapshot: EventHub.Snapshot) -> [UInt8] {
        let kind = session.kind
        var out: [UInt8] = []
        out.reserveCapacity(snapshot.stateJSON.count + kind.utf8.count + 22 + 64)
        out.append(contentsOf: #"{"reactor":"#.utf8)
        StateJSONEncoder.appendString(kind, into: &out)
        out.append(contentsOf: #","session":""#.utf8)
        session.key.append(to: &out)  // base64url: nothing to escape
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: #","state":"#.utf8)
        out.append(contentsOf: snapshot.stateJSON)
        out.append(contentsOf: #","version":"#.utf8)
        StateJSONEncoder.appendUnsigned(snapshot.version, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The session as an answer, with its version as the entity tag (see `Preconditions`).
    static func response(of session: any Session, _ snapshot: EventHub.Snapshot, status: Int = 200) -> Response {
        var response = Response.json(body(of: session, snapshot), status: status)
        response.headers.add("ETag", Preconditions.entityTag(snapshot.version))
        return response
    }
}
