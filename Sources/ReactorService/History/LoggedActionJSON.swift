#if canImport(Glibc)
import Glibc
#endif
import ReactorStore

/// An action log entry as the API shows it:
/// `{"number":3,"cause":"action","from":4,"version":5,"action":{..},"subject":"..","idempotencyKey":"..","time":".."}`;
/// `from` is absent when it changed nothing, `origin` (an effect's action) when not known.
enum LoggedActionJSON {
    static func append(_ entry: LoggedAction, to out: inout [UInt8]) {
        out.append(contentsOf: #"{"number":"#.utf8)
        StateJSONEncoder.appendUnsigned(entry.number, into: &out)
        out.append(contentsOf: #","cause":""#.utf8)
        out.append(contentsOf: entry.cause.rawValue.utf8)
        out.append(UInt8(ascii: "\""))
        if let origin = entry.origin {
            out.append(contentsOf: #","origin":"#.utf8)
            StateJSONEncoder.appendUnsigned(origin, into: &out)
        }
        if let first = entry.firstVersion {
            out.append(contentsOf: #","from":"#.utf8)
            StateJSONEncoder.appendUnsigned(first, into: &out)
        }
        out.append(contentsOf: #","version":"#.utf8)
        StateJSONEncoder.appendUnsigned(entry.version, into: &out)
        if let json = entry.json {
            out.append(contentsOf: #","action":"#.utf8)
            out.append(contentsOf: json)
        }
        if let subject = entry.subject {
            out.append(contentsOf: #","subject":"#.utf8)
            StateJSONEncoder.appendString(subject, into: &out)
        }
        if let key = entry.idempotencyKey {
            out.append(contentsOf: #","idempotencyKey":"#.utf8)
            StateJSONEncoder.appendString(key, into: &out)
        }
        out.append(contentsOf: #","time":""#.utf8)
        out.append(contentsOf: RFC3339.format(entry.time).utf8)
        out.append(contentsOf: #""}"#.utf8)
    }
}

/// Times as RFC 3339 text in UTC with milliseconds.
package enum RFC3339 {
    /// `seconds` since 1970.
    package static func format(_ seconds: Double) -> String {
        var whole = time_t(seconds.rounded(.down))
        var millis = Int(((seconds - Double(whole)) * 1000).rounded(.down))
        if millis > 999 { millis = 999 }
        var parts = tm()
        gmtime_r(&whole, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let fraction = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) + ".\(fraction)Z"
    }

    /// Now.
    package static func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return format(Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
    }
}
