/// `{"reactor":..,"session":..,"state":{..},"version":N}`, the answer of every route that
/// returns a session, written around the state's already encoded bytes.
enum SessionJSON {
    static func body(of session: any Session, _ snapshot: EventHub.Snapshot) -> [UInt8] {
        JSONText.object([
            ("reactor", JSONText.string(session.kind)),
            ("session", JSONText.string(session.id)),
            ("state", snapshot.stateJSON),
            ("version", Array(String(snapshot.version).utf8)),
        ])
    }
}
