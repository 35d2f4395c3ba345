import Foundation
#if canImport(Glibc)
import Glibc
#endif

// Time and process readings for the tests (the server runs in the test process).

public func monotonicNow() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// Polls `condition` every 10 ms for up to `timeout` seconds.
@discardableResult
public func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let start = monotonicNow()
    while !condition() {
        if monotonicNow() - start > timeout { return false }
        usleep(10_000)
    }
    return true
}

public enum ProcessStats {
    /// User + system CPU seconds of this process (server and test share it).
    public static func cpuSeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return 0 }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
        let utime = Double(fields[11]) ?? 0, stime = Double(fields[12]) ?? 0
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    public static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }
}

extension ProcessStats {
    /// Threads of this process (/proc/self/task).
    public static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }
}
