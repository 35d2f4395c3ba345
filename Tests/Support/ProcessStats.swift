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
    static func cpuSeconds() -> Double {
        (try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8)).flatMap { cpuSeconds(stat: $0) } ?? 0
    }

    /// The share of a core this process used over the next `seconds`, and its three busiest
    /// threads over them (name and share, for a failure's message).
    public static func cpuShare(seconds: Double) -> (share: Double, busiest: [String]) {
        let before = threadCPUSeconds()
        let cpuBefore = cpuSeconds()
        let started = monotonicNow()
        usleep(UInt32(seconds * 1_000_000))
        let after = threadCPUSeconds()
        let cpu = cpuSeconds() - cpuBefore
        let wall = monotonicNow() - started
        let used = after.map { thread, cpu in (thread, cpu - (before[thread] ?? 0)) }.sorted { $0.1 > $1.1 }
        let busiest = used.prefix(3).map { "\($0.0) \(String(format: "%.2f", $0.1 / wall * 100)) %" }
        return (cpu / wall, busiest)
    }

    /// CPU seconds by thread ("tid name") of this process's live threads.
    private static func threadCPUSeconds() -> [String: Double] {
        var seconds: [String: Double] = [:]
        for tid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
                let cpu = cpuSeconds(stat: stat), let open = stat.firstIndex(of: "("),
                let close = stat.lastIndex(of: ")")
            else { continue }
            seconds["\(tid) \(stat[stat.index(after: open)..<close])"] = cpu
        }
        return seconds
    }

    /// User + system CPU seconds from a /proc stat line.
    private static func cpuSeconds(stat text: String) -> Double? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // After "(comm)": state is field 3; utime and stime are fields 14 and 15.
        guard fields.count > 12, let utime = Double(fields[11]), let stime = Double(fields[12]) else { return nil }
        return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    public static func openDescriptors() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
    }
}

extension ProcessStats {
    /// Connected TCP sockets of this process whose local port is `port` (a server's own
    /// connections; its listening socket is not counted). Unlike the descriptor count, this
    /// sees nothing the runtime opens on the side (a dispatch timer, a directory listing).
    public static func connectedSockets(localPort port: UInt16) -> Int {
        let owned = Set(
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)"))
                    .flatMap { $0.hasPrefix("socket:[") ? String($0.dropFirst(8).dropLast()) : nil }
            })
        var count = 0
        for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
            // Read to the end: the file reports a size of 0, and a sized read stops at one page.
            guard let data = try? FileHandle(forReadingAtPath: table)?.readToEnd(),
                let text = String(data: data, encoding: .utf8)
            else { continue }
            for row in text.split(separator: "\n").dropFirst() {
                let fields = row.split(separator: " ")
                // local_address is ADDRESS:PORT in hex; state 0A is LISTEN; field 9 is the inode.
                guard fields.count > 9, let local = fields[1].split(separator: ":").last,
                    UInt16(local, radix: 16) == port, fields[3] != "0A", owned.contains(String(fields[9]))
                else { continue }
                count += 1
            }
        }
        return count
    }

    /// Threads of this process (/proc/self/task).
    public static func threadCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }
}
