// The group commit of reactord's SQLite store, through the thin libsqlite3 wrapper that
// ReactorStore uses (`SQLiteStore.commit`) and through GRDB 7 doing the same statements in the
// same transaction shape, alternating in one run on temp files. See README.md.
//
//     swift run -c release --package-path Benchmarks/StoreEngines [-- --dir /dev/shm --rounds 7 --seconds 1.5]

import Foundation
import GRDB
import ReactorStore

// MARK: - Options

struct Options {
    var rounds = 7
    /// Minimum wall time of one measurement (one engine, one batch size, one round).
    var seconds = 1.0
    /// Where the two database files go (a new temp folder inside it, removed at the end).
    var dir = FileManager.default.temporaryDirectory.path
    var sessions = 64
    var history = 1024
    /// `PRAGMA synchronous` for both engines: FULL (fsync per commit), NORMAL (reactord's default).
    var syncModes: [SQLiteSync] = [.full, .normal]

    init(_ arguments: [String]) {
        var rest = arguments.dropFirst()
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst() else { Self.usage("\(flag) needs a value") }
            switch flag {
            case "--rounds":
                guard let number = Int(value), number > 0 else { Self.usage("--rounds \(value)") }
                rounds = number
            case "--seconds":
                guard let number = Double(value), number > 0 else { Self.usage("--seconds \(value)") }
                seconds = number
            case "--dir": dir = value
            case "--sync":
                switch value {
                case "full": syncModes = [.full]
                case "normal": syncModes = [.normal]
                case "both": syncModes = [.full, .normal]
                default: Self.usage("--sync \(value)")
                }
            default: Self.usage("unknown option \(flag)")
            }
        }
    }

    static func usage(_ problem: String) -> Never {
        FileHandle.standardError.write(
            Data(
                """
                \(problem)
                usage: StoreEnginesBenchmark [--rounds N] [--seconds S] [--dir FOLDER] [--sync full|normal|both]

                """.utf8))
        exit(2)
    }
}

// MARK: - The GRDB engine: SQLiteStore.commit's statements and transaction, through GRDB

/// What a GRDB-based `commit` would be: one `DatabaseQueue` (one connection, GRDB's serial
/// queue), WAL and synchronous (FULL or NORMAL, as the wrapper is told) set by PRAGMA, one `BEGIN IMMEDIATE` transaction per
/// commit, cached statements. GRDB's typed arguments take JSON as a `String`, so the seam's
/// UTF-8 bytes are decoded into one (the wrapper binds the bytes directly): part of GRDB's cost.
final class GRDBEngine {
    let queue: DatabaseQueue

    init(path: String, sync: SQLiteSync) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)  // the wrapper's busy_timeout = 5000
        // reactord's own engine makes the schema (its SQL is internal to ReactorStore), then lets go.
        try SQLiteStore(path: path, sync: sync).close()
        queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: sync == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        }
    }

    func commit(_ changes: [StoreChange], historyLength: Int) throws {
        try queue.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                for change in changes {
                    switch change {
                    case let .session(write): try apply(write, historyLength: historyLength, db)
                    case let .delete(id):
                        try db.cachedStatement(sql: "DELETE FROM events WHERE session = ?").execute(arguments: [id])
                        try db.cachedStatement(sql: "DELETE FROM sessions WHERE id = ?").execute(arguments: [id])
                    case let .user(json?):
                        try db.cachedStatement(sql: "INSERT OR REPLACE INTO global_user (only, data) VALUES (1, ?)")
                            .execute(arguments: [String(decoding: json, as: UTF8.self)])
                    case .user(nil):
                        try db.cachedStatement(sql: "DELETE FROM global_user").execute()
                    }
                }
                return .commit
            }
        }
    }

    /// SQLiteStore's trim step (private there): the DELETE runs when the oldest kept seq
    /// crosses a multiple of it.
    static let trimStep: Int64 = 64

    /// SQLiteStore's `apply`, statement for statement (as in the working tree of 2026-11-23).
    private func apply(_ write: SessionWrite, historyLength: Int, _ db: Database) throws {
        if write.isNew {
            try db.cachedStatement(
                sql: """
                    INSERT INTO sessions (id, kind, state, version, created_at, last_active) VALUES (?, ?, ?, ?, ?, ?)
                    """
            )
            .execute(arguments: [
                write.id, write.kind, String(decoding: write.stateJSON, as: UTF8.self),
                Int64(clamping: write.version), write.createdAt, write.lastActive ?? write.createdAt,
            ])
        } else if let lastActive = write.lastActive {
            try db.cachedStatement(sql: "UPDATE sessions SET state = ?, version = ?, last_active = ? WHERE id = ?")
                .execute(arguments: [
                    String(decoding: write.stateJSON, as: UTF8.self), Int64(clamping: write.version),
                    lastActive, write.id,
                ])
        } else {
            try db.cachedStatement(sql: "UPDATE sessions SET state = ?, version = ? WHERE id = ?")
                .execute(arguments: [
                    String(decoding: write.stateJSON, as: UTF8.self), Int64(clamping: write.version),
                    write.id,
                ])
            if db.changesCount == 0 { return }
        }
        guard historyLength > 0, !write.events.isEmpty else { return }
        let insert = "INSERT OR REPLACE INTO events (session, seq, pulse, data) VALUES (?, ?, ?, ?)"
        for event in write.events {
            try db.cachedStatement(sql: insert)
                .execute(arguments: [
                    write.id, Int64(clamping: event.seq), event.pulse,
                    String(decoding: event.json, as: UTF8.self),
                ])
        }
        let oldestKept = Int64(clamping: write.version) - Int64(historyLength)
        let previous = Int64(clamping: write.events[0].seq) - 1 - Int64(historyLength)
        if oldestKept > 0, oldestKept / Self.trimStep != max(previous, 0) / Self.trimStep {
            try db.cachedStatement(sql: "DELETE FROM events WHERE session = ? AND seq <= ?")
                .execute(arguments: [write.id, oldestKept])
        }
    }
}

// MARK: - The workload

/// A counter-like state of about 60 bytes of JSON.
func stateJSON(_ version: UInt64) -> [UInt8] {
    Array(#"{"count":\#(version),"step":1,"label":"counter","updatedBy":"bench"}"#.utf8)
}

/// One engine's file, its sessions and their versions.
final class Subject {
    let name: String
    let commit: ([StoreChange]) throws -> Void
    let ids: [String]
    var versions: [UInt64]
    private var nextSingle = 0

    init(name: String, sessions: Int, commit: @escaping ([StoreChange]) throws -> Void) {
        self.name = name
        self.commit = commit
        ids = (0..<sessions).map { _ in UUID().uuidString.lowercased() }
        versions = Array(repeating: 0, count: sessions)
    }

    /// Inserts the sessions (isNew, one commit), then gives each a full history of `history`
    /// state events (one commit), so every measured write trims one event, as on a server
    /// that has been up for a while.
    func prepare(history: Int) throws {
        let now = Date().timeIntervalSince1970
        try commit(
            ids.map { id in
                .session(
                    SessionWrite(
                        id: id, kind: "counter", isNew: true, stateJSON: stateJSON(0), version: 0,
                        createdAt: now, lastActive: now, events: []))
            })
        let full = UInt64(history)
        try commit(
            ids.map { id in
                .session(
                    SessionWrite(
                        id: id, kind: "counter", isNew: false, stateJSON: stateJSON(full), version: full,
                        createdAt: now, lastActive: now,
                        events: (1...full).map { StoredEvent(seq: $0, pulse: nil, json: stateJSON($0)) }))
            })
        versions = Array(repeating: full, count: ids.count)
    }

    /// One group commit: `size` sessions (all of them for 64; the next one in turn for 1), each
    /// with one new state event and no new last-active time (the server writes it coarsely,
    /// so most writes carry nil).
    func batch(size: Int) -> [StoreChange] {
        let now = Date().timeIntervalSince1970
        var changes: [StoreChange] = []
        changes.reserveCapacity(size)
        for _ in 0..<size {
            let index = size == ids.count ? changes.count : nextSingle
            if size != ids.count { nextSingle = (nextSingle + 1) % ids.count }
            versions[index] += 1
            let version = versions[index]
            let json = stateJSON(version)
            changes.append(
                .session(
                    SessionWrite(
                        id: ids[index], kind: "counter", isNew: false, stateJSON: json, version: version,
                        createdAt: now, lastActive: nil, events: [StoredEvent(seq: version, pulse: nil, json: json)])))
        }
        return changes
    }
}

struct Sample {
    var batches = 0
    var wall: Duration = .zero
    var cpuNanoseconds: Int64 = 0
    var seconds: Double { Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18 }
    var batchesPerSecond: Double { Double(batches) / seconds }
    var cpuMicrosPerBatch: Double { Double(cpuNanoseconds) / 1000 / Double(batches) }
}

func processCPUNanoseconds() -> Int64 {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
}

/// Commits batches for at least `seconds`; only the commit calls are timed (building the
/// batch is the same code for both engines).
func measure(_ subject: Subject, size: Int, seconds: Double) throws -> Sample {
    let clock = ContinuousClock()
    var sample = Sample()
    let limit = Duration.milliseconds(Int64(seconds * 1000))
    while sample.wall < limit {
        let changes = subject.batch(size: size)
        let cpu = processCPUNanoseconds()
        let start = clock.now
        try subject.commit(changes)
        sample.wall += clock.now - start
        sample.cpuNanoseconds += processCPUNanoseconds() - cpu
        sample.batches += 1
    }
    return sample
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1
        ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func format(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }

// MARK: - Checks: the same schema, and the work really done

/// Rows of `sqlite_master` and the journal mode, read through a separate read-only connection.
func describe(_ path: String) throws -> (schema: [String], journal: String) {
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    return try queue.read { db in
        (
            try String.fetchAll(
                db, sql: "SELECT type || ' ' || name || ': ' || ifnull(sql, '') FROM sqlite_master ORDER BY name"),
            try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?"
        )
    }
}

/// Every session holds its tracked version and a contiguous history ending there, of at least
/// `history` and at most `history + trimStep` events (the store trims in steps).
func checkContents(_ path: String, _ subject: Subject, history: Int) throws {
    var configuration = Configuration()
    configuration.readonly = true
    let queue = try DatabaseQueue(path: path, configuration: configuration)
    try queue.read { db in
        for (id, version) in zip(subject.ids, subject.versions) {
            let stored = try Int64.fetchOne(db, sql: "SELECT version FROM sessions WHERE id = ?", arguments: [id])
            let row = try Row.fetchOne(
                db, sql: "SELECT count(*), min(seq), max(seq) FROM events WHERE session = ?",
                arguments: [id])!
            let (count, first, last) = (row[0] as Int64, row[1] as Int64, row[2] as Int64)
            guard stored == Int64(version), last == Int64(version), count == last - first + 1,
                count >= Int64(history), count <= Int64(history) + GRDBEngine.trimStep
            else {
                fatalError(
                    "\(subject.name): session \(id) holds version \(stored ?? -1), events \(row); expected \(version)")
            }
        }
    }
}

// MARK: - Run

let options = Options(CommandLine.arguments)
let folder = URL(fileURLWithPath: options.dir).appendingPathComponent("store-engines-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }
for sync in options.syncModes { try run(sync: sync) }

func run(sync: SQLiteSync) throws {
    let wrapperPath = folder + "/wrapper-\(sync).sqlite"
    let grdbPath = folder + "/grdb-\(sync).sqlite"

    let store = try SQLiteStore(path: wrapperPath, sync: sync)
    let grdb = try GRDBEngine(path: grdbPath, sync: sync)
    let history = options.history
    let wrapper = Subject(name: "wrapper", sessions: options.sessions) { try store.commit($0, historyLength: history) }
    let viaGRDB = Subject(name: "GRDB", sessions: options.sessions) { try grdb.commit($0, historyLength: history) }

    let (wrapperSchema, wrapperJournal) = try describe(wrapperPath)
    let (grdbSchema, grdbJournal) = try describe(grdbPath)
    guard wrapperSchema == grdbSchema, wrapperJournal == "wal", grdbJournal == "wal" else {
        fatalError("the two files differ: \(wrapperSchema) \(wrapperJournal) vs \(grdbSchema) \(grdbJournal)")
    }
    let grdbSynchronous = try grdb.queue.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }
    guard grdbSynchronous == (sync == .full ? 2 : 1) else {
        fatalError("GRDB connection: synchronous = \(String(describing: grdbSynchronous))")
    }

    try wrapper.prepare(history: history)
    try viaGRDB.prepare(history: history)

    let sqliteVersion = try grdb.queue.read { try String.fetchOne($0, sql: "SELECT sqlite_version()") } ?? "?"
    print(
        """
        StoreEngines: SQLiteStore.commit (thin libsqlite3 wrapper) vs the same SQL through GRDB 7.10.0
        SQLite \(sqliteVersion), files in \(folder) (WAL, synchronous = \(sync == .full ? "FULL" : "NORMAL") in both, same schema: checked)
        \(options.sessions) sessions with \(history) events of history each; every write: UPDATE sessions,
        INSERT OR REPLACE one state event (\(stateJSON(UInt64(history) + 1).count) bytes of JSON); every \(GRDBEngine.trimStep)th write of a session
        also DELETEs the \(GRDBEngine.trimStep) events that fell out of its history (SQLiteStore trims in steps)
        \(options.rounds) rounds of ≥ \(options.seconds) s per measurement, engines alternating (order swapped every round)

        """)

    let sizes = [options.sessions, 1]
    var samples: [String: [Sample]] = [:]
    for round in 1...options.rounds {
        var line = "round \(round):"
        for size in sizes {
            let order = round % 2 == 1 ? [wrapper, viaGRDB] : [viaGRDB, wrapper]
            for subject in order {
                let sample = try measure(subject, size: size, seconds: options.seconds)
                samples["\(subject.name) \(size)", default: []].append(sample)
                line +=
                    "  \(subject.name)×\(size) \(format(sample.batchesPerSecond)) b/s \(format(sample.cpuMicrosPerBatch)) µs cpu/b"
            }
        }
        print(line)
    }

    try checkContents(wrapperPath, wrapper, history: history)
    try checkContents(grdbPath, viaGRDB, history: history)
    print(
        "contents checked: every session holds its version and its newest \(history) to \(history + Int(GRDBEngine.trimStep)) events, in both files\n"
    )

    print("medians of \(options.rounds) rounds (cpu = process CPU time per commit; wall includes waiting for fsync):")
    print("batch  engine   batches/s  session writes/s  cpu µs/batch  wall µs/batch")
    for size in sizes {
        for name in ["wrapper", "GRDB"] {
            let list = samples["\(name) \(size)"]!
            let rate = median(list.map(\.batchesPerSecond))
            let sizeColumn = String(size).rightPad(5)
            let nameColumn = name.rightPad(7)
            let rateColumn = format(rate).leftPad(9)
            let writesColumn = format(rate * Double(size)).leftPad(16)
            let cpuColumn = format(median(list.map(\.cpuMicrosPerBatch))).leftPad(12)
            let wallColumn = format(1e6 / rate).leftPad(13)
            print("\(sizeColumn)  \(nameColumn)  \(rateColumn)  \(writesColumn)  \(cpuColumn)  \(wallColumn)")
        }
        let ratios = zip(samples["wrapper \(size)"]!, samples["GRDB \(size)"]!).map {
            $0.batchesPerSecond / $1.batchesPerSecond
        }
        let cpuRatios = zip(samples["wrapper \(size)"]!, samples["GRDB \(size)"]!).map {
            $1.cpuMicrosPerBatch / $0.cpuMicrosPerBatch
        }
        let ratio = format(median(ratios), 3)
        let range = "\(format(ratios.min()!, 3))–\(format(ratios.max()!, 3))"
        let cpuRatio = format(median(cpuRatios), 3)
        print(
            "batch \(size): throughput ratio wrapper/GRDB, median of per-round ratios: \(ratio) (range \(range)); "
                + "CPU per batch GRDB/wrapper: \(cpuRatio)")
    }

    store.close()
    print("")
}

extension String {
    func leftPad(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}

extension String {
    func rightPad(_ width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }
}
