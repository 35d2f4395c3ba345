#if canImport(Glibc)
import Glibc
#endif

/// A few connections for the calls that come from any thread (reads, claims, renewals): each
/// call takes one, waiting while all are busy. A connection found broken is dropped and a new
/// one made on the next call, so the store recovers by itself once PostgreSQL is back.
final class PostgresPool: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let available = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let limit: Int
    private let connect: () throws(PostgresError) -> PostgresConnection
    // Guarded by mutex.
    private var idle: [PostgresConnection] = []
    private var opened = 0
    private var closed = false

    init(limit: Int, connect: @escaping () throws(PostgresError) -> PostgresConnection) {
        self.limit = limit
        self.connect = connect
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(available, nil)
    }

    deinit {
        pthread_cond_destroy(available)
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        available.deallocate()
    }

    /// Runs `body` on a connection of its own; nil when the pool is closed.
    func with<T>(_ body: (PostgresConnection) throws -> T) throws -> T? {
        pthread_mutex_lock(mutex)
        while idle.isEmpty && opened >= limit && !closed { pthread_cond_wait(available, mutex) }
        if closed {
            pthread_mutex_unlock(mutex)
            return nil
        }
        var connection = idle.popLast()
        if connection == nil { opened += 1 }
        pthread_mutex_unlock(mutex)
        if let stale = connection, !stale.isUsableAfterIdle { connection = nil }   // its slot is reused
        if connection == nil {
            do {
                connection = try connect()   // outside the lock: it can take up to connect_timeout
            } catch {
                giveBack(nil)
                throw error
            }
        }
        defer { giveBack(connection!) }
        return try body(connection!)
    }

    /// Drops the idle connections; busy ones are dropped when they come back.
    func close() {
        pthread_mutex_lock(mutex)
        closed = true
        let dropped = idle
        idle = []
        opened -= dropped.count
        pthread_cond_broadcast(available)
        pthread_mutex_unlock(mutex)
        _ = dropped
    }

    private func giveBack(_ connection: PostgresConnection?) {
        pthread_mutex_lock(mutex)
        if let connection, !connection.isBroken, !closed {
            idle.append(connection)
        } else {
            opened -= 1
        }
        pthread_cond_signal(available)
        pthread_mutex_unlock(mutex)
    }
}
