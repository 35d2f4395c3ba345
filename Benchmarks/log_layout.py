#!/usr/bin/env python3
"""Why SQLite keeps the action log in the `events` table (issue 29): pages written per commit.

    Benchmarks/log_layout.py [--commits 3000] [--per-commit 2]

SQLite appends whole pages to its WAL, so what a commit costs is the pages it dirties. This
replays reactord's writes on three layouts of one file (Python's sqlite3, the tables as reactord
makes them): 64 sessions with 1,000-odd events each; each commit updates `--per-commit` sessions'
rows, adds an event to each (and trims the history in steps of 64), and logs each action:

- none:   no log (`--action-log 0`);
- riding: each entry on the row of the event it made (reactord's layout; an entry without an
          event of its commit gets a row as in `events`);
- events: the log as rows of `events`, keys counting down from 2^62 + 2^61: a session's newest
          entry lands beside its newest event (shipped before `riding`);
- table:  a table of its own keyed (session, number), as first built.

and prints the WAL's growth per commit, in pages.
"""
import argparse
import os
import random
import sqlite3
import tempfile
import time

BASE, SPAN = 1 << 62, 1 << 61


def pages_per_commit(layout, commits, per_commit, sessions=64):
    folder = tempfile.mkdtemp(prefix="reactord-log-layout-")
    path = os.path.join(folder, layout + ".sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("PRAGMA wal_autocheckpoint = 0")   # the WAL's growth is the measure
    db.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY NOT NULL, state TEXT NOT NULL, version INTEGER NOT NULL) "
               "WITHOUT ROWID")
    db.execute("CREATE TABLE events (session TEXT NOT NULL, seq INTEGER NOT NULL, pulse TEXT, data TEXT NOT NULL, "
               "cause TEXT, origin INTEGER, first_version INTEGER, version INTEGER, subject TEXT, "
               "idempotency_key TEXT, time REAL, number INTEGER, action TEXT, PRIMARY KEY (session, seq)) WITHOUT ROWID")
    db.execute("CREATE TABLE action_log (session TEXT NOT NULL, number INTEGER NOT NULL, cause TEXT NOT NULL, "
               "origin INTEGER, first_version INTEGER, version INTEGER NOT NULL, action TEXT, subject TEXT, "
               "idempotency_key TEXT, time REAL NOT NULL, PRIMARY KEY (session, number)) WITHOUT ROWID")
    ids = ["%022x" % random.getrandbits(88) for _ in range(sessions)]
    versions = dict.fromkeys(ids, 0)
    for session in ids:
        db.execute("INSERT INTO sessions VALUES (?, '{}', 0)", (session,))

    def commit(batch):
        db.execute("BEGIN")
        for session in batch:
            versions[session] += 1
            version = versions[session]
            state = '{"alertMessage":null,"count":%d,"user":null}' % version
            db.execute("UPDATE sessions SET state = ?, version = ? WHERE id = ?", (state, version, session))
            entry = ("action", version, version, '{"type":"increase"}', time.time())
            if layout == "riding":
                db.execute("INSERT OR REPLACE INTO events (session, seq, pulse, data, number, cause, first_version, "
                           "version, action, time) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
                           (session, version, state, version, *entry))
            else:
                db.execute("INSERT OR REPLACE INTO events (session, seq, pulse, data) VALUES (?, ?, NULL, ?)",
                           (session, version, state))
            if layout == "events":
                db.execute("INSERT OR REPLACE INTO events (session, seq, cause, first_version, version, data, time) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)", (session, BASE + SPAN - version, *entry))
            elif layout == "table":
                db.execute("INSERT OR REPLACE INTO action_log (session, number, cause, first_version, version, action, "
                           "time) VALUES (?, ?, ?, ?, ?, ?, ?)", (session, version, *entry))
            if version % 64 == 0 and version > 1024:
                db.execute("DELETE FROM events WHERE session = ? AND seq <= ?", (session, version - 1024))
                if layout == "riding":   # the log keeps fewer than the history: its trim clears the entries
                    db.execute("UPDATE events SET number = NULL, cause = NULL, first_version = NULL, version = NULL, "
                               "action = NULL, time = NULL WHERE session = ? AND seq < ? AND number <= ?",
                               (session, BASE, version - 1000))
                elif layout == "events":
                    db.execute("DELETE FROM events WHERE session = ? AND seq >= ?", (session, BASE + SPAN - (version - 1000)))
                elif layout == "table":
                    db.execute("DELETE FROM action_log WHERE session = ? AND number <= ?", (session, version - 1000))
        db.execute("COMMIT")

    for _ in range(1200 * sessions // per_commit):   # every session past its history's length
        commit(random.sample(ids, per_commit))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(commits):
        commit(random.sample(ids, per_commit))
    grown = os.path.getsize(path + "-wal")
    db.close()
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))
    os.rmdir(folder)
    return grown / (4096 + 24) / commits   # a WAL frame: a 24-byte header and a 4 KiB page


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--per-commit", type=int, default=2)
    args = parser.parse_args()
    for layout in ("none", "riding", "events", "table"):
        print("%-6s %.2f pages per commit (%d actions a commit)"
              % (layout, pages_per_commit(layout, args.commits, args.per_commit), args.per_commit), flush=True)


if __name__ == "__main__":
    main()
