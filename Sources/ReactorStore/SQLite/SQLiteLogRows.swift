/// Where the SQLite engine keeps a session's action log: in the `events` table, under the
/// session's own key, numbered backwards from far above any event id. A commit appends a
/// session's new events at the top of its event ids and its new log entries at the bottom of
/// its log keys, which is the same spot of the same B-tree: one page written for both, where a
/// table of its own cost a page of its own per session per commit (SQLite writes whole pages to
/// its WAL; BENCHMARKS.md, "The action log").
enum SQLiteLogRows {
    /// Every log key is above it; every event id below.
    static let base: Int64 = 1 << 62
    private static let span: Int64 = 1 << 61

    /// The key of entry `number` (from 1; numbers stay far below 2^61).
    static func key(_ number: UInt64) -> Int64 { base + span - Int64(clamping: number) }

    /// The entry number a key stands for.
    static func number(_ key: Int64) -> Int64 { base + span - key }
}
