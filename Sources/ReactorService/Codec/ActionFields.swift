import MicroHTTP

/// The wire form of an action: a JSON object whose `"type"` names the case and whose other
/// fields are its associated values, e.g. `{"type":"alert","message":"Hello"}`.
///
/// A reactor's `Action` decodes itself with it:
/// ```swift
/// extension CounterReactor.Action: Decodable {
///     init(from decoder: any Decoder) throws {
///         let fields = try ActionFields(from: decoder)
///         switch fields.type {
///         case "increase": self = .increase
///         case "alert": self = .alert(try fields.decode("message"))
///         default: throw fields.unknownType(expected: ["increase", "alert"])
///         }
///     }
/// }
/// ```
public struct ActionFields {
    /// The action's `"type"` field: which case it is.
    public let type: String
    private let container: KeyedDecodingContainer<FieldKey>
    /// Set only while the spec is made from the action's own decoding (ActionSchemaProbe).
    private let listener: (any ActionTypeListener)?

    /// Reads the action object; fails when it is not an object or has no string `"type"`.
    public init(from decoder: any Decoder) throws {
        container = try decoder.container(keyedBy: FieldKey.self)
        type = try container.decode(String.self, forKey: FieldKey("type"))
        // Asked of the probe's decoder itself, not of `userInfo`: a request's decoder copies its
        // `userInfo` on each read (`ValueDecoder.userInfo`), and only the probe sets a listener.
        // The type compared first: a cast of an `any Decoder` costs every action ~700 instructions.
        listener = Swift.type(of: decoder) == ProbeDecoder.self ? (decoder as? ProbeDecoder)?.probe : nil
    }

    /// The associated value in field `name`; a missing or mistyped field is an error naming it.
    public func decode<T: Decodable>(_ name: String, as _: T.Type = T.self) throws -> T {
        try container.decode(T.self, forKey: FieldKey(name))
    }

    /// Like `decode`, but `nil` when the field is absent or null.
    public func decodeIfPresent<T: Decodable>(_ name: String, as _: T.Type = T.self) throws -> T? {
        try container.decodeIfPresent(T.self, forKey: FieldKey(name))
    }

    /// The error for a `type` the reactor does not know, listing the ones it does.
    public func unknownType(expected: [String]) -> any Error {
        listener?.expectedTypes(expected)
        return DecodingError.dataCorruptedError(
            forKey: FieldKey("type"), in: container,
            debugDescription: "unknown action type '\(Response.excerpt(type))'; expected one of: "
                + expected.joined(separator: ", "))
    }

    /// A field's name as a coding key.
    public struct FieldKey: CodingKey {
        /// The field's name.
        public let stringValue: String
        /// Always nil: an action's fields have names, not positions.
        public var intValue: Int? { nil }
        /// The key of field `name`.
        public init(_ name: String) { stringValue = name }
        /// The key of field `stringValue`.
        public init?(stringValue: String) { self.stringValue = stringValue }
        /// Always nil: an action's fields have names, not positions.
        public init?(intValue: Int) { nil }
    }
}
