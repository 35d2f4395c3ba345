import Foundation

/// `?fields=a,b`: a stream that wants only some top-level fields of the state.
struct FieldFilter: Hashable {
    let fields: [String]

    /// Parses the query value; unknown names are an error naming them and what exists.
    init(query: String, knownFields: Set<String>) throws(FieldFilterError) {
        let names = query.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
        guard !names.isEmpty else { throw .empty }
        let unknown = names.filter { !knownFields.contains($0) }
        guard unknown.isEmpty else { throw .unknown(unknown, known: knownFields.sorted()) }
        fields = Array(Set(names)).sorted()
    }

    /// The state's JSON reduced to the chosen fields, keys sorted.
    func apply(to stateJSON: [UInt8]) -> [UInt8] {
        guard let object = Self.topLevelObject(stateJSON) else { return stateJSON }
        let subset = object.filter { fields.contains($0.key) }
        let data = try? JSONSerialization.data(
            withJSONObject: subset, options: [.sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        return data.map(Array.init) ?? stateJSON
    }

    static func fieldNames(of stateJSON: [UInt8]) -> Set<String> {
        Set(topLevelObject(stateJSON)?.keys.map { $0 } ?? [])
    }

    private static func topLevelObject(_ json: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed])) as? [String: Any]
    }
}

enum FieldFilterError: Error, CustomStringConvertible {
    case empty
    case unknown([String], known: [String])

    var description: String {
        switch self {
        case .empty:
            return "query parameter 'fields' names no field"
        case let .unknown(names, known):
            return "unknown state field\(names.count == 1 ? "" : "s") "
                + names.map { "'\($0)'" }.joined(separator: ", ")
                + " in 'fields'; the state has: " + known.joined(separator: ", ")
        }
    }
}
