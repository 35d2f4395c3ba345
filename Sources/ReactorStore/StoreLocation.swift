/// Which store a server uses, as `--store` names it: `memory`, `sqlite:PATH` or
/// `sqlite:PATH?sync=full`.
public enum StoreLocation: Equatable, Sendable, CustomStringConvertible {
    /// Nothing outlives the process.
    case memory
    /// An embedded SQLite database file, one process at a time.
    case sqlite(path: String, sync: SQLiteSync = .normal)

    /// Reads `memory` or `sqlite:PATH[?sync=normal|full]` (a relative path is the working
    /// directory's).
    public init(parsing text: String) throws(StoreError) {
        if text == "memory" {
            self = .memory
        } else if text.hasPrefix("sqlite:") {
            var path = Substring(text.dropFirst("sqlite:".count))
            var sync = SQLiteSync.normal
            if let query = path.lastIndex(of: "?"), path[query...].hasPrefix("?sync=") {
                let value = String(path[path.index(query, offsetBy: "?sync=".count)...])
                guard let chosen = SQLiteSync(rawValue: value) else {
                    throw .cannotOpen("sync must be 'normal' or 'full', not '\(value)'")
                }
                sync = chosen
                path = path[..<query]
            }
            guard !path.isEmpty else { throw .cannotOpen("'sqlite:' needs a file path, e.g. sqlite:reactord.sqlite") }
            self = .sqlite(path: String(path), sync: sync)
        } else {
            throw .cannotOpen("unknown store '\(text)'; expected 'memory' or 'sqlite:PATH'")
        }
    }

    public var description: String {
        switch self {
        case .memory: "memory"
        case let .sqlite(path, .normal): "sqlite:\(path)"
        case let .sqlite(path, sync): "sqlite:\(path)?sync=\(sync.rawValue)"
        }
    }

    /// Opens the store's engine; nil for `memory`, which keeps sessions in the process alone.
    /// `leaseDuration`: a shared store's lease on a session, in seconds.
    public func open(leaseDuration: Double = 5) throws(StoreError) -> (any StoreEngine)? {
        switch self {
        case .memory: nil
        case let .sqlite(path, sync): try SQLiteStore(path: path, sync: sync)
        }
    }
}

/// When a SQLite commit reaches the disk (SQLite's `synchronous`, in WAL mode).
public enum SQLiteSync: String, Sendable {
    /// A commit is in the WAL file when it is answered: it survives any crash of the process
    /// (kill -9, out of memory, a container restart); a power loss or kernel crash can take
    /// back the last commits before the next checkpoint's fsync.
    case normal
    /// Every commit is fsynced before it is answered: it survives power loss too, at the cost
    /// of one fsync per group commit.
    case full
}
