internal import ConcurrencyPrimitives

/// A few connections for the calls that come from any thread (reads, claims, renewals): each
/// call takes one, waiting while all are busy. A connection found broken is dropped and a new
/// one made on the next call, so the store recovers by itself once PostgreSQL is back.
final class PostgresPool: Sendable {
    private struct State {
        var idle: [PostgresConnection] = []
        var opened = 0
        var closed = false
    }

    private let state = Locked(State())
    /// Signalled when a connection comes back or its slot frees, and when the pool closes.
    private let available = Condition()
    private let limit: Int
    private let connect: @Sendable () throws(PostgresError) -> PostgresConnection

    init(limit: Int, connect: @escaping @Sendable () throws(PostgresError) -> PostgresConnection) {
        self.limit = limit
        self.connect = connect
    }

    /// Runs `body` on a connection of its own; nil when the pool is closed.
    func with<T>(_ body: (PostgresConnection) throws -> T) throws -> T? {
        let limit = self.limit
        let taken = state.withLock(
            waitingOn: available,
            until: { !$0.idle.isEmpty || $0.opened < limit || $0.closed }
        ) { state, _ in
            if state.closed { return nil as PostgresConnection?? }
            let connection = state.idle.popLast()
            if connection == nil { state.opened += 1 }
            return .some(connection)
        }
        guard var connection = taken else { return nil }
        if let stale = connection, !stale.isUsableAfterIdle { connection = nil }  // its slot is reused
        if connection == nil {
            do {
                connection = try connect()  // outside the lock: it can take up to connect_timeout
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
        let dropped = state.withLock { state in
            state.closed = true
            let dropped = state.idle
            state.idle = []
            state.opened -= dropped.count
            return dropped
        }
        available.broadcast()
        _ = dropped  // closed here, outside the lock
    }

    private func giveBack(_ connection: PostgresConnection?) {
        let dropped = state.withLock { state -> [PostgresConnection] in
            if let connection, !connection.isBroken, !state.closed {
                state.idle.append(connection)
                return []
            }
            state.opened -= 1
            // One that stopped answering: the idle ones reach the same server, likely as stuck,
            // and each would hold its next caller for the whole timeout.
            guard connection?.timedOut == true else { return [] }
            let idle = state.idle
            state.idle = []
            state.opened -= idle.count
            return idle
        }
        if dropped.isEmpty { available.signal() } else { available.broadcast() }
    }
}
