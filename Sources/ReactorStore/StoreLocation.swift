/// Which store a server uses, as `--store` names it: `memory`, `sqlite:PATH`,
/// `sqlite:PATH?sync=full` or `postgres://user:password@host:port/db` (cluster mode).
public enum StoreLocation: Equatable, Sendable, CustomStringConvertible {
    /// Nothing outlives the process.
    case memory
    /// An embedded SQLite database file, one process at a time.
    case sqlite(path: String, sync: SQLiteSync = .normal)
    /// A PostgreSQL database several nodes share: a libpq URI (`postgres://` or
    /// `postgresql://`), its options (`sslmode` and the rest) passed through to libpq.
    case postgres(url: String)

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
            // An option it does not know would otherwise name a new, empty file ("r.sqlite?synchronous=full").
            if let query = path.firstIndex(of: "?") {
                throw .cannotOpen(
                    "'\(path[query...])' is no option of sqlite:PATH, which takes ?sync=normal or ?sync=full "
                        + "(a file name with '?' in it is not supported)")
            }
            self = .sqlite(path: String(path), sync: sync)
        } else if text.hasPrefix("postgres://") || text.hasPrefix("postgresql://") {
            // libpq ends the user info at the first '@': the rest of a password would be read as
            // the host name, and echoed in libpq's error.
            guard Self.authority(of: text).filter({ $0 == "@" }).count <= 1 else {
                throw .cannotOpen("the store URL's user or password contains '@': write it as %40")
            }
            self = .postgres(url: text)
        } else {
            throw .cannotOpen(
                "unknown store '\(Self.redacted(text))'; expected 'memory', 'sqlite:PATH' or "
                    + "'postgres://user:password@host:port/db'")
        }
    }

    public var description: String {
        switch self {
        case .memory: "memory"
        case let .sqlite(path, .normal): "sqlite:\(path)"
        case let .sqlite(path, sync): "sqlite:\(path)?sync=\(sync.rawValue)"
        case let .postgres(url): Self.redacted(url)
        }
    }

    /// Opens the store's engine; nil for `memory`, which keeps sessions in the process alone.
    /// `leaseDuration`: seconds a shared store's lease lasts without renewal (PostgreSQL only).
    package func open(leaseDuration: Double = 5) throws(StoreError) -> (any StoreEngine)? {
        switch self {
        case .memory: nil
        case let .sqlite(path, sync): try SQLiteStore(path: path, sync: sync)
        case let .postgres(url): try PostgresStore(url: url, leaseDuration: leaseDuration)
        }
    }

    /// The URI's password as written (percent-encoded) and as libpq reads it (decoded), from
    /// its user info or a `password=` option; empty when it has none.
    static func passwords(in url: String) -> [String] {
        var found: [String] = []
        if let range = passwordRange(in: url) { found.append(String(url[range])) }
        if let query = url.firstIndex(of: "?") {
            for option in url[url.index(after: query)...].split(separator: "&") where option.hasPrefix("password=") {
                found.append(String(option.dropFirst("password=".count)))
            }
        }
        found = found.filter { !$0.isEmpty }
        return found + found.map(percentDecoded).filter { !found.contains($0) }
    }

    /// The URI with its password (user info or `password=` option) replaced by `***`.
    static func redacted(_ url: String) -> String {
        var text = url
        if let range = passwordRange(in: text) { text.replaceSubrange(range, with: "***") }
        guard let query = text.firstIndex(of: "?") else { return text }
        let options = text[text.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
            .map { $0.hasPrefix("password=") ? "password=***" : String($0) }
        return text[...query] + options.joined(separator: "&")
    }

    /// `user:password@host:port` in `scheme://user:password@host:port/db?options`.
    private static func authority(of url: String) -> Substring {
        guard let scheme = url.firstRange(of: "://") else { return "" }
        let rest = url[scheme.upperBound...]
        return rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex)]
    }

    /// Where the password sits in `scheme://user:password@host…`.
    private static func passwordRange(in url: String) -> Range<String.Index>? {
        let authority = authority(of: url)
        guard let at = authority.lastIndex(of: "@"),
            let colon = authority[..<at].firstIndex(of: ":")
        else { return nil }
        return authority.index(after: colon)..<at
    }

    private static func percentDecoded(_ text: String) -> String {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "%"), input.count >= 2,
                let value = UInt8(String(decoding: input.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                input = input.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
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
