internal import ConcurrencyPrimitives
import Logging
import MicroHTTP
import ReactorService

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension BufferedLogHandler: AccessLineWriting {
    /// The access line written straight into `LogOutput` in this handler's format, the same bytes
    /// as swift-log's `StreamLogHandler` (text) or `JSONLogHandler` (json) would write for it.
    func accessLineWriter(level: Logger.Level, source: String) -> (any AccessLineWriter)? {
        // A provider's metadata is per call: such a logger goes the ordinary way.
        guard metadataProvider == nil else { return nil }
        return AccessLineFormatter(format: format, label: label, level: level, source: source, base: metadata)
    }
}

/// Makes one access line in bytes: the level, label, source, keys and the logger's own metadata
/// are rendered once, here; per line only the request's fields and the timestamp (cached per
/// second) are written.
struct AccessLineFormatter: AccessLineWriter {
    let format: LogFormat
    /// text: ` info reactord:`; json: `","level":"info","label":"reactord","source":"…","message":"`.
    let head: [UInt8]
    /// text: ` [ReactorService] `.
    let sourceTag: [UInt8]
    /// Per `AccessLine.Key`: text ` key=`, json `"key":"` (the separator is written apart).
    let keys: [[UInt8]]
    /// The logger's metadata (`log=access`, …), sorted by key, rendered (`key=value`,
    /// `"key":value`), each with how many of `AccessLine.Key`'s names sort before it and whether
    /// it is one of them (then the line's own field, when present, replaces it, as swift-log merges).
    let base: [(position: Int, isKey: Bool, rendered: [UInt8])]

    init(format: LogFormat, label: String, level: Logger.Level, source: String, base metadata: Logger.Metadata) {
        self.format = format
        switch format {
        case .text:
            head = Array(" \(level)\(label.isEmpty ? "" : " ")\(label):".utf8)
            sourceTag = Array(" [\(source)] ".utf8)
            keys = AccessLine.Key.allCases.map { Array("\($0.name)=".utf8) }
        case .json:
            var head = "\",\"level\":"
            JSONLogHandler.append(string: level.rawValue, to: &head)
            head += ",\"label\":"
            JSONLogHandler.append(string: label, to: &head)
            head += ",\"source\":"
            JSONLogHandler.append(string: source, to: &head)
            head += ",\"message\":\""
            self.head = Array(head.utf8)
            sourceTag = []
            keys = AccessLine.Key.allCases.map { key in
                var rendered = ""
                JSONLogHandler.append(string: key.name, to: &rendered)
                return Array((rendered + ":\"").utf8)
            }
        }
        let names = AccessLine.Key.allCases.map(\.name)
        base = metadata.keys.sorted().map { key in
            let value = metadata[key]!
            var rendered = ""
            switch format {
            case .text: rendered = "\(key)=\(value)"
            case .json:
                JSONLogHandler.append(string: key, to: &rendered)
                rendered += ":"
                JSONLogHandler.append(value: value, to: &rendered)
            }
            return (names.filter { $0 < key }.count, names.contains(key), Array(rendered.utf8))
        }
    }

    func write(_ line: AccessLine) { LogOutput.standardError.write(bytes: bytes(of: line)) }

    /// The line as written, newline included.
    func bytes(of line: AccessLine) -> [UInt8] {
        var fields = FieldWriter(formatter: self)
        fields.out.reserveCapacity(320 + line.path.utf8.count + (line.query?.utf8.count ?? 0))
        switch format {
        case .text:
            // StreamLogHandler: `<time> <level> <label>: k=v k=v [<source>] <message>`.
            LogTimestamps.shared.appendLocal(to: &fields.out)
            fields.out += head
            line.forEachField(&fields)
            fields.finish()
            fields.out += sourceTag
            Self.append(line.method, to: &fields.out)
            fields.out.append(UInt8(ascii: " "))
            Self.append(line.path, to: &fields.out)
            fields.out.append(UInt8(ascii: "\n"))
        case .json:
            fields.out.append(contentsOf: #"{"timestamp":""#.utf8)
            LogTimestamps.shared.appendUTC(to: &fields.out)
            fields.out += head
            Self.appendEscaped(line.method, to: &fields.out)
            fields.out.append(UInt8(ascii: " "))
            Self.appendEscaped(line.path, to: &fields.out)
            fields.out.append(contentsOf: #"","fields":{"#.utf8)
            line.forEachField(&fields)
            fields.finish()
            fields.out.append(contentsOf: "}}\n".utf8)
        }
        return fields.out
    }

    /// Writes the fields, the logger's metadata merged in key order.
    private struct FieldWriter: AccessLineVisitor {
        let formatter: AccessLineFormatter
        var out: [UInt8] = []
        var next = 0
        var first = true

        init(formatter: AccessLineFormatter) { self.formatter = formatter }

        mutating func visit(_ key: AccessLine.Key, _ value: AccessLine.Value) {
            let position = key.rawValue
            while next < formatter.base.count, formatter.base[next].position <= position {
                let entry = formatter.base[next]
                if !(entry.position == position && entry.isKey) {
                    separate()
                    out += entry.rendered
                }
                next += 1
            }
            separate()
            out += formatter.keys[position]
            let json = formatter.format == .json
            switch value {
            case let .text(text):
                if json {
                    AccessLineFormatter.appendEscaped(text, to: &out)
                } else {
                    AccessLineFormatter.append(text, to: &out)
                }
            case let .utf8(bytes):
                if json { AccessLineFormatter.appendEscaped(bytes, to: &out) } else { out.append(contentsOf: bytes) }
            case let .number(number):
                if number < 0 { out.append(UInt8(ascii: "-")) }
                AccessLineFormatter.appendDecimal(number.magnitude, to: &out)
            case let .milliseconds(nanoseconds):
                // `AccessLog.milliseconds`: whole milliseconds, then three digits of microseconds.
                let micros = nanoseconds / 1_000
                AccessLineFormatter.appendDecimal(UInt(micros / 1_000), to: &out)
                out.append(UInt8(ascii: "."))
                let fraction = micros % 1_000
                out.append(UInt8(ascii: "0") + UInt8(fraction / 100))
                out.append(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
                out.append(UInt8(ascii: "0") + UInt8(fraction % 10))
            }
            if json { out.append(UInt8(ascii: "\"")) }
        }

        /// The metadata that sorts after every field.
        mutating func finish() {
            while next < formatter.base.count {
                separate()
                out += formatter.base[next].rendered
                next += 1
            }
        }

        private mutating func separate() {
            if formatter.format == .text {
                out.append(UInt8(ascii: " "))
            } else if !first {
                out.append(UInt8(ascii: ","))
            }
            first = false
        }
    }

    static func append(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    static func appendDecimal(_ number: UInt, to out: inout [UInt8]) {
        if number >= 10 { appendDecimal(number / 10, to: &out) }
        out.append(UInt8(ascii: "0") + UInt8(number % 10))
    }

    static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { appendEscaped($0, to: &out) }
    }

    /// The inside of a JSON string, escaped as the JSON log handler escapes (`JSON.appendEscaped`).
    static func appendEscaped<Bytes: Collection<UInt8>>(_ bytes: Bytes, to out: inout [UInt8]) {
        JSON.appendEscaped(bytes, to: &out)
    }
}

/// The log's timestamps, formatted once a second: `strftime` and `localtime` per line were a
/// good part of an access line's cost.
final class LogTimestamps: Sendable {
    static let shared = LogTimestamps()

    private struct Seconds {
        /// `StreamLogHandler`'s: local time, `%Y-%m-%dT%H:%M:%S%z`.
        var localSecond = -1
        var local: [UInt8] = []
        /// `JSONLogHandler`'s, up to the seconds: UTC, `%Y-%m-%dT%H:%M:%S`.
        var utcSecond = -1
        var utc: [UInt8] = []
    }

    private let seconds = Locked(Seconds())

    private init() {}

    func appendLocal(to out: inout [UInt8]) {
        let now = time(nil)
        seconds.withLock { formatted in
            if now != formatted.localSecond {
                var seconds = now
                var parts = tm()
                localtime_r(&seconds, &parts)
                formatted.local = Self.format(&parts, "%Y-%m-%dT%H:%M:%S%z")
                formatted.localSecond = now
            }
            out += formatted.local
        }
    }

    /// With milliseconds and `Z`: `2026-11-23T13:19:05.123Z`.
    func appendUTC(to out: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        seconds.withLock { formatted in
            if now.tv_sec != formatted.utcSecond {
                var seconds = now.tv_sec
                var parts = tm()
                gmtime_r(&seconds, &parts)
                formatted.utc = Self.format(&parts, "%Y-%m-%dT%H:%M:%S")
                formatted.utcSecond = now.tv_sec
            }
            out += formatted.utc
        }
        let millis = UInt8(truncatingIfNeeded: now.tv_nsec / 1_000_000 / 100)
        let rest = Int(now.tv_nsec / 1_000_000 % 100)
        out.append(UInt8(ascii: "."))
        out.append(UInt8(ascii: "0") + millis)
        out.append(UInt8(ascii: "0") + UInt8(rest / 10))
        out.append(UInt8(ascii: "0") + UInt8(rest % 10))
        out.append(UInt8(ascii: "Z"))
    }

    private static func format(_ parts: inout tm, _ pattern: String) -> [UInt8] {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, pattern, &parts)
        return buffer[0..<count].map { UInt8(bitPattern: $0) }
    }
}
