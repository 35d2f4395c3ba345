/// Immutable, already-framed bytes (e.g. one SSE event). One Frame is queued by reference on
/// every stream that sends it: the bytes are copied only into each connection's socket buffer.
public final class Frame: Sendable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public convenience init(_ text: String) { self.init(Array(text.utf8)) }
}
