import ConcurrencyPrimitives
import MicroHTTP

#if os(Linux)
import Glibc

/// The `process_*` metrics Prometheus' own client libraries export, read from /proc/self
/// when /metrics is read: resident and virtual memory, open and max file descriptors, CPU
/// seconds (user + system), and the start time in seconds since the epoch.
final class ProcessMetrics: Sendable {
    private let residentMemory: Gauge
    private let virtualMemory: Gauge
    private let openFDs: Gauge
    private let maxFDs: Gauge
    private let cpuSeconds: Counter
    private let startTime: Gauge
    private let cpuSecondsCounted = Locked<Double>(0)

    init(registry: MetricsRegistry) {
        residentMemory = registry.makeGauge(
            name: "process_resident_memory_bytes", help: "Resident memory size in bytes.")
        virtualMemory = registry.makeGauge(name: "process_virtual_memory_bytes", help: "Virtual memory size in bytes.")
        openFDs = registry.makeGauge(name: "process_open_fds", help: "Number of open file descriptors.")
        maxFDs = registry.makeGauge(name: "process_max_fds", help: "Maximum number of open file descriptors.")
        cpuSeconds = registry.makeCounter(
            name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.")
        startTime = registry.makeGauge(
            name: "process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.")
        startTime.set(Self.startTimeSeconds() ?? 0)
        update()
    }

    func update() {
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        if let statm = Self.read("/proc/self/statm")?.split(separator: " "), statm.count >= 2,
            let pages = Double(statm[0]), let resident = Double(statm[1])
        {
            virtualMemory.set(pages * pageSize)
            residentMemory.set(resident * pageSize)
        }
        openFDs.set(Double(Self.countEntries("/proc/self/fd")))
        if let limit = OpenFileLimit.current() { maxFDs.set(Double(limit.soft)) }
        var usage = rusage()
        if getrusage(RUSAGE_SELF.rawValue, &usage) == 0 {
            let total =
                Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
                + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
            // A Prometheus counter only goes up: add what was spent since the last reading.
            let delta = cpuSecondsCounted.withLock { counted -> Double in
                let delta = total - counted
                if delta > 0 { counted = total }
                return delta
            }
            if delta > 0 { cpuSeconds.increment(by: delta) }
        }
    }

    /// From /proc/self/stat's start time (clock ticks after boot) and /proc/stat's btime.
    static func startTimeSeconds() -> Double? {
        guard let stat = read("/proc/self/stat"), let close = stat.lastIndex(of: ")") else { return nil }
        // The fields after "(comm)": state is field 3, starttime field 22.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]),
            let line = read("/proc/stat")?.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst(6))
        else { return nil }
        return boot + ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func countEntries(_ directory: String) -> Int {
        guard let dir = opendir(directory) else { return 0 }
        defer { closedir(dir) }
        var count = 0
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let entry = readdir(dir) {
            // The name read where it lies: an entry is only as long as its name, so copying the
            // whole `dirent` (`entry.pointee`) can read past the end of the directory buffer.
            let name = UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self)
            if strcmp(name, ".") != 0 && strcmp(name, "..") != 0 { count += 1 }
        }
        return count - 1  // the directory stream's own descriptor
    }
}
#else
/// Read from /proc: Linux only; elsewhere the family is absent.
final class ProcessMetrics: Sendable {
    init(registry: MetricsRegistry) {}
    func update() {}
}
#endif
