import ArgumentParser
import Logging

/// `--log-format`: text (swift-log's stream handler) or json (one object per line).
public enum LogFormat: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// The two formats: `text` is swift-log's stream handler, `json` one JSON object per line.
    case text, json
}

/// An on/off option (`--access-log on|off`).
public enum Switch: String, ExpressibleByArgument, CaseIterable, Sendable {
    /// The two positions: `on` turns the option on, `off` turns it off.
    case on, off
}

extension LogFormat {
    /// The handler every logger of the process gets, on stderr (buffered: `LogOutput`).
    public func handler(label: String, level: Logger.Level) -> any LogHandler {
        var handler: any LogHandler
        switch self {
        case .text: handler = StreamLogHandler(label: label, stream: BufferedStandardError())
        case .json: handler = JSONLogHandler(label: label)
        }
        handler.logLevel = level
        return BufferedLogHandler(inner: handler, format: self, label: label)
    }
}
