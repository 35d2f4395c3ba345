import Logging
import MicroHTTP
import ReactorService

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--log-format json`: one JSON object per line on stderr, what container log collectors
/// parse: `{"timestamp":"2026-11-23T13:19:05.123Z","level":"info","label":"reactord",
/// "source":"ReactorService","message":"request","fields":{"status":"200",...}}`.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { LogOutput.standardError.write(line(for: event)) }

    /// The event's line, newline included.
    func line(for event: LogEvent) -> String {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { _, new in new } }
        if let own = event.metadata { fields.merge(own) { _, new in new } }
        var line = "{\"timestamp\":\""
        line += Self.timestamp()
        line += "\",\"level\":"
        Self.append(string: event.level.rawValue, to: &line)
        line += ",\"label\":"
        Self.append(string: label, to: &line)
        line += ",\"source\":"
        Self.append(string: event.source, to: &line)
        line += ",\"message\":"
        Self.append(string: event.message.description, to: &line)
        if !fields.isEmpty {
            line += ",\"fields\":"
            Self.append(value: .dictionary(fields), to: &line)
        }
        line += "}\n"
        return line
    }

    /// RFC 3339 in UTC with milliseconds.
    static func timestamp() -> String { RFC3339.now() }

    static func append(value: Logger.Metadata.Value, to out: inout String) {
        switch value {
        case let .string(text): append(string: text, to: &out)
        case let .stringConvertible(convertible): append(string: convertible.description, to: &out)
        case let .array(values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                append(value: element, to: &out)
            }
            out += "]"
        case let .dictionary(members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                append(string: key, to: &out)
                out += ":"
                append(value: members[key]!, to: &out)
            }
            out += "}"
        }
    }

    /// JSON string escaping, as MicroHTTP writes its problem documents.
    static func append(string: String, to out: inout String) { JSON.appendString(string, to: &out) }
}
