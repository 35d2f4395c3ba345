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

/// Any JSON value, to carry a pulse's value until its type is known.
enum JSONValue: Codable, Equatable {
    case null, bool(Bool), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case let .bool(value): try container.encode(value)
        case let .number(value):
            if value.rounded() == value, abs(value) < 1e15 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case let .string(value): try container.encode(value)
        case let .array(value): try container.encode(value)
        case let .object(value): try container.encode(value)
        }
    }
}
