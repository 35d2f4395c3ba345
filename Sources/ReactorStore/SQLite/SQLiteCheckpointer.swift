internal import CSQLite
internal import ConcurrencyPrimitives

/// Copies the WAL into the database file on a thread of its own, so that commits do not run
/// checkpoints (with their `fsync`s) while the actions waiting for them wait too.
///
/// Every `interval` the thread copies what it can beside the writer. Such a copy never reaches
/// the WAL's last frame while the writer keeps writing, and only a WAL copied to its end starts
/// over from its beginning; so once the WAL holds `restartFrames`, the thread copies the rest
/// under the writer's lock, where only the frames written since its last pass are left. Should
/// the thread fall behind all the same (it waits for that lock like any commit), the commit that
/// takes the WAL past `commitFrames` copies it itself, as SQLite's own checkpoints do: the WAL
/// stays bounded. BENCHMARKS.md, "Checkpoints off the commit".
final class SQLiteCheckpointer: Sendable {
    /// SQLite's own `wal_autocheckpoint` default: about 4 MB of WAL at 4 KiB pages.
    static let restartFrames = 1000
    static let commitFrames = 1800
    static let interval = 0.02

    /// Held by a copy: the writer's own copy waits for the thread's (a passive copy that finds
    /// another under way copies nothing, and the WAL grew on past `commitFrames`).
    private let copyLock = Mutex()
    private let wakeLock = Mutex()
    private let wake = Condition()
    private let isStopping = Locked(false)
    private let thread: Locked<PlatformThread?> = Locked(nil)

    /// Starts a thread with a connection of its own to the file at `path`; `writeLock` is the
    /// lock its writer commits under.
    init(path: String, writeLock: Mutex) throws {
        let connection = try SQLiteConnection(path: path)
        // A read first: a connection that has never read the file does not know it is in WAL
        // mode, and its checkpoints copy nothing (SQLite reports -1 frames).
        try connection.execute("PRAGMA busy_timeout = 5000; SELECT count(*) FROM sqlite_schema")
        let owned = Guarded(connection)  // the thread's alone from here
        let started = try PlatformThread.joinable { [self] in
            owned.withLock { connection in run(connection, writeLock: writeLock) }
        }
        thread.withLock { $0 = started }
    }

    /// After each commit of the writer, on its thread (its WAL hook), with `walFrames` in the WAL.
    func committed(walFrames: Int, on writer: OpaquePointer) {
        guard walFrames >= Self.commitFrames else { return }
        // The writer's own connection, under its lock: nothing writes meanwhile, the copy reaches the end.
        copyLock.withLock { _ = sqlite3_wal_checkpoint_v2(writer, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil) }
    }

    /// Stops the thread (a pass under way ends first); the writer's close copies what is left.
    func stop() {
        wakeLock.withLock {
            isStopping.withLock { $0 = true }
            wake.signal()
        }
        thread.withLock { thread in
            thread?.join()
            thread = nil
        }
    }

    private func run(_ connection: SQLiteConnection, writeLock: Mutex) {
        while !waitOrStop() {
            // Busy or failing now: the next pass tries again, and the commits bound the WAL meanwhile.
            guard let (frames, copied) = try? copyLock.withLock({ try connection.checkpoint() }),
                frames >= Self.restartFrames, copied < frames
            else { continue }
            _ = try? writeLock.withLock { try copyLock.withLock { try connection.checkpoint() } }
        }
    }

    /// Waits `interval`; true once `stop` has been called.
    private func waitOrStop() -> Bool {
        wakeLock.withLock {
            if isStopping.withLock({ $0 }) { return true }
            _ = wake.wait(on: wakeLock, seconds: Self.interval)
            return isStopping.withLock { $0 }
        }
    }
}
