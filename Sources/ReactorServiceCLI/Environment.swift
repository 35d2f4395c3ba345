import ArgumentParser
import Logging

/// The `REACTORD_*` twins of the command-line options; a bad value is an error naming it.
struct Environment {
    private let variables: [String: String]

    init(_ variables: [String: String]) { self.variables = variables }

    func value<T: ExpressibleByArgument>(_ name: String) throws -> T? {
        guard let text = variables[name], !text.isEmpty else { return nil }
        return try Self.parse(text, name: name)
    }

    static func parse<T: ExpressibleByArgument>(_ text: String, name: String) throws -> T {
        guard let value = T(argument: text) else {
            // A choice (`on`/`off`, `text`/`json`, the levels) lists its values, as the flag's own error does.
            let expected =
                T.allValueStrings.isEmpty
                ? expectation(for: T.self) : "one of " + T.allValueStrings.joined(separator: ", ")
            throw ValidationError("\(name): '\(text)' is not \(expected)")
        }
        return value
    }

    /// What a value of `type` looks like, in the words of the option's help.
    private static func expectation(for type: Any.Type) -> String {
        switch type {
        case is UInt16.Type: return "a port number from 0 to 65535"
        case is Int.Type: return "a whole number"
        case is Double.Type: return "a number"
        default: return "a valid \(type)"
        }
    }
}

// swift-format-ignore: AvoidRetroactiveConformances
// swift-log's level as a flag's value: neither package can declare it, and reactord is an executable.
extension Logger.Level: @retroactive ExpressibleByArgument {}
