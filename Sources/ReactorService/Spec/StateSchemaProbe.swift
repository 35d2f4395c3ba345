/// The JSON Schema of a reactor's State from its Swift type, not from one value of it: a field
/// that is nil or an empty array in the initial state still gets its type (`String?` is
/// `{type: string, nullable: true}`, `[Item]` has `items` with Item's properties).
///
/// It runs the State's own `init(from:)` against the probe decoder of ActionSchemaProbe, which
/// answers every question with a sample value and notes the keys and the Swift types asked
/// for: `decode` is a required field, `decodeIfPresent` and an Optional's `decodeNil` a
/// nullable one, an unkeyed container an array (one element, so its type is asked once), a
/// `Dictionary` an object whose values are of one type (`additionalProperties`).
///
/// Limits, where the value-based schema (StateJSONEncoder.schema(of:)) stays in force: a type
/// whose `init(from:)` refuses the samples (a String enum has no case `""`, a validating
/// initializer throws) or reads what the probe cannot offer (a nested container in an array,
/// a type nested more than 8 deep, so recursive types) leaves its field, and the fields the
/// State decodes after it, to the value; a custom `init(from:)` that decodes other keys or
/// types than its `encode(to:)` writes is described as it decodes.
enum StateSchemaProbe {
    /// The probed schema merged into the value-based one, `nil` when neither is known. What is
    /// written (`required`) comes from the value, which was encoded; each field's type from the
    /// probe where it found one.
    static func schema<State: Encodable>(of initialState: State) -> [String: Any]? {
        let fromValue = StateJSONEncoder().schema(of: initialState)
        guard let decodable = State.self as? any Decodable.Type else { return fromValue }
        let (probed, complete) = probe(decodable)
        return merge(probed: probed, complete: complete, value: fromValue)
    }

    /// The schema the probe found for `type`, and whether its `init(from:)` ran to the end
    /// (else the schema holds the fields read before it threw).
    static func probe<T: Decodable>(_ type: T.Type) -> (schema: [String: Any], complete: Bool) {
        let root = SchemaNode()
        let complete = (try? T(from: ProbeDecoder(probe: Probe(type: nil), node: root, path: []))) != nil
        return (root.finished, complete)
    }

    static func merge(probed: [String: Any], complete: Bool, value: [String: Any]?) -> [String: Any]? {
        guard var merged = value else { return complete ? probed : nil }
        guard let probedProperties = probed["properties"] as? [String: Any],
            var properties = merged["properties"] as? [String: Any]
        else { return merged }
        for (name, schema) in probedProperties {
            guard var typed = schema as? [String: Any], isTyped(typed) else { continue }
            // A field the State never writes (one it only decodes) is not on the wire.
            guard let known = properties[name] as? [String: Any] else { continue }
            if known["nullable"] as? Bool == true { typed["nullable"] = true }
            properties[name] = typed
        }
        merged["properties"] = properties
        return merged
    }

    private static func isTyped(_ schema: [String: Any]) -> Bool {
        schema["type"] != nil
    }
}
