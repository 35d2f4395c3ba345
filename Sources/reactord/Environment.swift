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
            throw ValidationError("\(name): '\(text)' is not a valid \(T.self)")
        }
        return value
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
