/// The client side of the server's `ActionFields`: writes an action in its wire form, a JSON
/// object whose `"type"` names the case and whose other fields are its associated values,
/// e.g. `{"type":"alert","message":"Hello"}`.
///
/// ```swift
/// enum CounterAction: Encodable {
///     case increase, decrease, alert(String)
///
///     func encode(to encoder: any Encoder) throws {
///         switch self {
///         case .increase: _ = ActionFieldsWriter(type: "increase", to: encoder)
///         case .decrease: _ = ActionFieldsWriter(type: "decrease", to: encoder)
///         case let .alert(message):
///             var fields = ActionFieldsWriter(type: "alert", to: encoder)
///             try fields.encode(message, as: "message")
///         }
///     }
/// }
/// ```
public struct ActionFieldsWriter {
    private var container: KeyedEncodingContainer<FieldKey>
    private var typeError: (any Error)?

    /// Starts the object with its `"type"`.
    public init(type: String, to encoder: any Encoder) {
        container = encoder.container(keyedBy: FieldKey.self)
        do { try container.encode(type, forKey: FieldKey("type")) } catch { typeError = error }
    }

    /// The associated value `value` as field `name`.
    public mutating func encode<T: Encodable>(_ value: T, as name: String) throws {
        if let typeError { throw typeError }
        try container.encode(value, forKey: FieldKey(name))
    }

    /// Like `encode`, but writes nothing for `nil`.
    public mutating func encodeIfPresent<T: Encodable>(_ value: T?, as name: String) throws {
        if let typeError { throw typeError }
        try container.encodeIfPresent(value, forKey: FieldKey(name))
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

/// An action without a Swift type of its own: a `type` and the fields of any keyed
/// `Encodable` (a struct, or a `[String: T]` dictionary), written side by side.
///
/// ```swift
/// try await session.send(TypedAction("increase"))
/// try await session.send(TypedAction("alert", ["message": "Hello"]))
/// ```
public struct TypedAction<Fields: Encodable & Sendable>: Encodable, Sendable {
    /// The action's `"type"`: which case it is.
    public var type: String
    /// The associated values, written beside `type`.
    public var fields: Fields

    /// The action `type` with the fields of `fields`.
    public init(_ type: String, _ fields: Fields) {
        self.type = type
        self.fields = fields
    }

    /// Writes one JSON object: `fields`' members and `"type"`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: ActionFieldsWriter.FieldKey.self)
        if let dictionary = fields as? [String: any Encodable] {
            for (name, value) in dictionary {
                try container.encode(value, forKey: ActionFieldsWriter.FieldKey(name))
            }
        } else {
            // Keyed containers of one encoder share the same JSON object.
            try fields.encode(to: encoder)
        }
        try container.encode(type, forKey: ActionFieldsWriter.FieldKey("type"))
    }
}

/// No associated values.
public struct NoFields: Encodable, Sendable {
    /// No fields.
    public init() {}
    /// Writes an empty object (`type` is added beside it).
    public func encode(to encoder: any Encoder) throws {
        _ = encoder.container(keyedBy: ActionFieldsWriter.FieldKey.self)
    }
}

extension TypedAction where Fields == NoFields {
    /// The action `type` with no fields: `{"type": type}`.
    public init(_ type: String) {
        self.init(type, NoFields())
    }
}
