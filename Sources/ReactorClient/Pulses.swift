import Foundation

/// A pulse event of any reactor: `{"name": "alertMessage", "value": ...}`. Decode the value
/// with `value(as:)`, or give `events(pulses:)` your own `Decodable` pulse type instead.
public struct AnyPulse: Decodable, Sendable, Equatable {
    /// The pulse's state field, e.g. `alertMessage`.
    public let name: String
    /// The value's JSON text.
    public let valueJSON: String

    private enum CodingKeys: String, CodingKey { case name, value }

    /// A pulse of field `name` whose value is the JSON text `valueJSON`.
    public init(name: String, valueJSON: String) {
        self.name = name
        self.valueJSON = valueJSON
    }

    /// Decodes a pulse event's data, keeping its value as JSON text (a missing value is `null`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        let value = try container.decodeIfPresent(JSONValue.self, forKey: .value) ?? .null
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        valueJSON = String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    /// The value as `T`, e.g. `pulse.value(as: String?.self)`.
    public func value<T: Decodable>(as _: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(valueJSON.utf8))
    }
}
