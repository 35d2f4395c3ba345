import MicroHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What the spec says of one registered reactor kind, found from its own types: the action
/// types and fields its `Decodable` reads (ActionSchemaProbe), its State's fields and their
/// types as its `Decodable` reads them (StateSchemaProbe), and its initial state's encoding
/// (which fields are always written, `@Pulse` fields, the types the probe cannot find).
struct KindDescription {
    let name: String
    let actions: [ActionCaseSchema]?
    let state: [String: Any]?
    let pulses: [String]

    static func of<State: Encodable, Action: Decodable>(kind: String, initialState: State, action _: Action.Type)
        -> KindDescription
    {
        let pulses = (try? StateEncoding.encode(initialState))?.pulses.map(\.name) ?? []
        return KindDescription(
            name: kind, actions: ActionSchemaProbe.cases(of: Action.self),
            state: StateSchemaProbe.schema(of: initialState), pulses: pulses)
    }
}

/// `/openapi.yaml`: the bundled document (Resources/openapi.yaml) with the registered kinds'
/// schemas put in: `ReactorKind` (an enum of the kinds), `State` and `Action` (per kind, each
/// action type its own schema, chosen by a discriminator on `type`), and each kind's pulses.
/// The schemas are written as JSON, which is YAML.
enum OpenAPISpec {
    static let generatedMarker = "    # reactord: the registered kinds' schemas go here"

    static func render(template: String, kinds: [KindDescription], defaultKind: String?) -> String {
        var lines: [String] = []
        func add(_ name: String, _ schema: [String: Any]) { lines.append("    \(name): \(json(schema))") }

        add(
            "ReactorKind",
            kinds.isEmpty
                ? ["type": "string"]
                : [
                    "type": "string", "enum": kinds.map(\.name),
                    "description": "A registered reactor kind" + (defaultKind.map { "; without one, `\($0)`" } ?? "")
                        + ".",
                ])
        add("State", kinds.isEmpty ? ["type": "object"] : union(kinds.map { ref(component($0.name) + "State") }))
        add("Action", kinds.isEmpty ? genericAction : ["anyOf": kinds.map { ref(component($0.name) + "Action") }])
        // A state event's data: with `?fields=` only some fields, so none is required.
        var stateFields = union(
            kinds.isEmpty
                ? [["type": "object"]]
                : kinds.map { kind -> [String: Any] in
                    var fields = kind.state ?? ["type": "object"]
                    fields["required"] = nil
                    return fields
                })
        stateFields["description"] =
            "A state event's data, or a session view's state: the State, or with `?fields=` only the fields named."
        add("StateFields", stateFields)
        let pulsing = kinds.filter { !$0.pulses.isEmpty }
        add(
            "Pulse",
            pulsing.isEmpty
                ? [
                    "description": "The data of a `pulse` event: no registered kind has a @Pulse field.",
                    "type": "object", "required": ["name", "value"],
                    "properties": ["name": ["type": "string"], "value": [String: Any]()],
                ]
                : union(pulsing.map { ref(component($0.name) + "Pulse") }))
        for kind in kinds {
            let prefix = component(kind.name)
            var state = kind.state ?? ["type": "object"]
            var description = "The state of `\(kind.name)`, as its State type encodes."
            if !kind.pulses.isEmpty {
                description +=
                    " @Pulse fields (each assignment is also a `pulse` event, see \(prefix)Pulse): "
                    + kind.pulses.map { "`\($0)`" }.joined(separator: ", ") + "."
            }
            state["description"] = description
            add(prefix + "State", state)
            if let cases = kind.actions, !cases.isEmpty {
                var mapping: [String: String] = [:]
                for action in cases {
                    let name = prefix + "Action" + component(action.type)
                    mapping[action.type] = "#/components/schemas/\(name)"
                    var properties: [String: Any] = ["type": ["type": "string", "enum": [action.type]]]
                    for field in action.fields { properties[field.name] = field.schema }
                    add(
                        name,
                        [
                            "type": "object", "properties": properties,
                            "required": ["type"] + action.fields.filter(\.required).map(\.name),
                        ])
                }
                add(
                    prefix + "Action",
                    [
                        "oneOf": cases.map { ref(prefix + "Action" + component($0.type)) },
                        "discriminator": ["propertyName": "type", "mapping": mapping],
                        "description":
                            "An action of `\(kind.name)`: `type` names the case, the other fields are its values.",
                    ])
            } else {
                add(prefix + "Action", genericAction)
            }
            if !kind.pulses.isEmpty {
                add(
                    prefix + "Pulse",
                    [
                        "type": "object", "required": ["name", "value"],
                        "description": "The data of a `pulse` event of `\(kind.name)`.",
                        "properties": ["name": ["type": "string", "enum": kind.pulses], "value": pulseValue(kind)],
                    ])
            }
        }
        let firstAction = kinds.first { $0.name == defaultKind }?.actions?.first?.type ?? "increase"
        return
            template
            .replacing(generatedMarker, with: lines.joined(separator: "\n"))
            .replacing("{type: reactord-default-action}", with: "{type: \(json(firstAction))}")
            .replacing("pattern: reactord-fields-pattern", with: "pattern: \(json(fieldsPattern(kinds)))")
    }

    /// The `?fields=` values the server accepts (FieldFilter): names of State fields, separated by
    /// commas, with spaces, tabs, line breaks and empty items around them. The names are every
    /// kind's: the parameter belongs to the route, not to one kind.
    static func fieldsPattern(_ kinds: [KindDescription]) -> String {
        let names = Set(kinds.flatMap { ($0.state?["properties"] as? [String: Any])?.keys.map { $0 } ?? [] })
        guard !names.isEmpty else { return "[^\\s,]" }
        let name = "(?:" + names.sorted().map(regexEscaped).joined(separator: "|") + ")"
        let space = FieldFilter.separatorSpace
        let around = "[" + space + ",]*"
        return "^" + around + name + "(?:[" + space + "]*," + around + name + ")*" + around + "$"
    }

    private static func regexEscaped(_ text: String) -> String {
        var out = ""
        for character in text {
            if "\\^$.|?*+()[]{}/-".contains(character) { out.append("\\") }
            out.append(character)
        }
        return out
    }

    /// A pulse's value: the schema of its field when the kind has one pulse (with several, the
    /// value's schema depends on `name`, and any JSON is allowed).
    private static func pulseValue(_ kind: KindDescription) -> [String: Any] {
        guard kind.pulses.count == 1, let properties = kind.state?["properties"] as? [String: Any],
            let field = properties[kind.pulses[0]] as? [String: Any]
        else { return [:] }
        return field
    }

    /// For a kind whose Action does not decode through ActionFields: only `type` is known.
    private static var genericAction: [String: Any] {
        ["type": "object", "required": ["type"], "properties": ["type": ["type": "string"]]]
    }

    private static func ref(_ name: String) -> [String: Any] { ["$ref": "#/components/schemas/\(name)"] }

    /// One of these schemas: `anyOf`, or the schema itself when there is one. openapi-python-client
    /// 0.29 makes each nested object of a one-member anyOf's member twice, and gives up on it
    /// ("Attempted to generate duplicate models"): the typed client would lose State.
    private static func union(_ schemas: [[String: Any]]) -> [String: Any] {
        schemas.count == 1 ? schemas[0] : ["anyOf": schemas]
    }

    /// A kind or type name as a component name: `my-kind` → `MyKind`.
    static func component(_ name: String) -> String {
        name.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).map { $0.prefix(1).uppercased() + $0.dropFirst() }
            .joined()
    }

    /// One line of JSON, keys sorted, slashes unescaped (a schema is dictionaries, arrays,
    /// strings, booleans and numbers). Written here: JSONSerialization is all of Foundation.
    private static func json(_ value: Any) -> String {
        var out = ""
        append(value, to: &out)
        return out
    }

    private static func append(_ value: Any, to out: inout String) {
        switch value {
        case let object as [String: Any]:
            out += "{"
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                JSON.appendString(key, to: &out)
                out += ":"
                append(object[key]!, to: &out)
            }
            out += "}"
        case let array as [Any]:
            out += "["
            for (index, element) in array.enumerated() {
                if index > 0 { out += "," }
                append(element, to: &out)
            }
            out += "]"
        case let string as String: JSON.appendString(string, to: &out)
        case let flag as Bool: out += flag ? "true" : "false"
        case let number as Int: out += String(number)
        case let number as Double: out += number.isFinite ? String(number) : "null"
        default: out += "null"
        }
    }
}
