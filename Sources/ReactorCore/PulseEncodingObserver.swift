/// Learns, while a state is being encoded, which `@Pulse` fields it holds and how often
/// each was assigned: set one in an encoder's `userInfo` under `.pulseObserver` (or give it
/// from a `PulseObservingEncoder`) and every `Pulse` that encodes reports itself. A server
/// finds pulse events this way in the same pass that encodes the state, with no reflection.
public protocol PulseEncodingObserver: AnyObject {
    /// Called by each `Pulse` as it encodes: where it sits in the state (`codingPath`), its
    /// `valueUpdatedCount`, and its value.
    func didEncodePulse(at codingPath: [any CodingKey], updatedCount: UInt, value: any Encodable)
}

extension CodingUserInfoKey {
    /// Where `Pulse.encode(to:)` looks for a `PulseEncodingObserver`.
    public static let pulseObserver = CodingUserInfoKey(rawValue: "ReactorCore.pulseObserver")!
}

/// An encoder that carries its pulse observer itself: `Pulse` asks it before `userInfo`, which
/// costs a dictionary lookup and a cast from `Any` for every pulse of every state encoded.
public protocol PulseObservingEncoder: Encoder {
    /// The observer every `Pulse` this encoder encodes reports to; nil for none.
    var pulseObserver: (any PulseEncodingObserver)? { get }
}
