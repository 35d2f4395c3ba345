#if canImport(Glibc)
import Glibc
#endif

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
