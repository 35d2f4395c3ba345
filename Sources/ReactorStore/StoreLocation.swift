/// Which store a server uses, as `--store` names it: `memory` or `sqlite:PATH`.
public enum StoreLocation: Equatable, Sendable, CustomStringConvertible {
    /// Nothing outlives the process.
    case memory
    /// An embedded SQLite database file, one process at a time.
    case sqlite(path: String)

    /// Reads `memory` or `sqlite:PATH` (a relative path is the working directory's).
    public init(parsing text: String) throws(StoreError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("sqlite:") {
            let path = String(text.dropFirst("sqlite:".count))
            guard !path.isEmpty else { throw .cannotOpen("--store sqlite: needs a file path, e.g. sqlite:reactord.sqlite") }
            self = .sqlite(path: path)
        } else {
            throw .cannotOpen("unknown store '\(text)'; expected 'memory' or 'sqlite:PATH'")
        }
    }

    public var description: String {
        switch self {
        case .memory: "memory"
        case let .sqlite(path): "sqlite:\(path)"
        }
    }

    /// Opens the store's engine; nil for `memory`, which keeps sessions in the process alone.
    public func open() throws(StoreError) -> (any StoreEngine)? {
        switch self {
        case .memory: nil
        case let .sqlite(path): try SQLiteStore(path: path)
        }
    }
}
