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

/// Told of each `Pulse` encoded on this thread while `PulseRecording.recording(into:_:)` runs:
/// for an encoder that knows where it stands itself, so no `codingPath` array is made and no
/// cast of the encoder to `PulseObservingEncoder` is tried (~1,100 instructions a pulse).
/// Package API: the server's state writer is its one user.
package protocol PulseEncodingRecorder: AnyObject {
    /// Records the pulse that `encoder` just encoded, with its `valueUpdatedCount` and value.
    /// False when `encoder` is none of the recorder's: the pulse then reports to the encoder's
    /// own observer, as without a recorder.
    func record(pulseIn encoder: any Encoder, updatedCount: UInt, value: any Encodable) -> Bool
}

/// Where `Pulse.encode(to:)` finds a `PulseEncodingRecorder`: one per thread, for the span of
/// one encoding.
package enum PulseRecording {
    /// Runs `body` with `recorder` told of every pulse encoded on this thread meanwhile.
    package static func recording<T>(into recorder: any PulseEncodingRecorder, _ body: () throws -> T) rethrows -> T {
        let context = ThreadContext.current
        let outer = context.pulseRecorder
        context.pulseRecorder = recorder
        defer { context.pulseRecorder = outer }
        return try body()
    }
}
