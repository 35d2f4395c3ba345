import ConcurrencyPrimitives
import Dispatch
import MicroHTTP
import ReactorCore
import ReactorStore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The service's side of a shared store (cluster mode): the leases kept alive, the sessions
/// let go when one is lost, the global user fed from the store, the streams of sessions other
/// nodes hold, and the forwarding of requests to those nodes. Nodes never talk to each other
/// except to forward a request; everything else goes through the store.
final class Cluster: Sendable {
    let store: any ClusterStore
    let forwarder: Forwarder
    let followers: Followers
    let metrics: ClusterMetrics
    let placement = Placement()
    /// The global user's version this node's `currentUser` has been given.
    /// Held while `currentUser` is fed, so changes reach it in order, once each.
    private let fedUserVersion = Locked<UInt64>(0)
    /// Where sessions held elsewhere live, as a claim last found (by session, with when to ask
    /// again), so requests are forwarded without a database round trip each.
    private let holders = Locked<[SessionKey: (address: String, until: Double)]>([:])
    /// Whether a pass of `take` runs.
    private let taking = Locked(false)
    /// Sessions `take` could not load, and until when it leaves them (ProcessClock).
    private let notTakenBefore = Locked<[SessionKey: Double]>([:])
    /// The lease keeper's thread: asked to stop, and stopped.
    private let keeper = Locked((stopping: false, stopped: false))
    /// Signalled, under `keeper`'s lock, when either changes.
    private let keeperChanged = Condition()

    init(store: any ClusterStore, configuration: ServiceConfiguration, metrics: ServiceMetrics) {
        self.store = store
        self.metrics = ClusterMetrics(registry: metrics.registry)
        forwarder = Forwarder(maxThreads: 256, timeout: configuration.forwardTimeout.inSeconds, origin: store.nodeID)
        followers = Followers(
            store: store, historyLength: configuration.historyLength,
            ttl: configuration.sessionTTL.inSeconds, metrics: metrics, clusterMetrics: self.metrics)
    }

    /// The global user as the store has it now, and its version: before any session sees
    /// `currentUser`.
    func loadUser() throws(StoreError) -> (user: [UInt8]?, version: UInt64) {
        let changes = try store.userChanges(after: 0)
        guard let last = changes.last else { return (try store.loadUser(), 0) }
        fedUserVersion.withLock { $0 = last.version }
        return (last.json, last.version)
    }

    /// Starts listening for wake-ups and keeping leases: every third of a lease (at most a
    /// second) the leases are renewed, sessions no longer held are let go, and followed
    /// sessions are checked.
    func start(_ context: ServiceContext) {
        store.listen { [weak self, weak context] wake in
            guard let self, let context else { return }
            switch wake {
            case let .events(session, seq, sentAt, carried):
                followers.wake(session, seq: seq, carried: carried, sentAt: sentAt)
            case let .ended(session, reason): followers.end(session, reason: reason)
            case .user: feedUser(context)
            case .reconnected:
                feedUser(context)
                followers.check()
            }
        }
        let interval = min(store.leaseDuration / 3, 1)
        do throws(PlatformThreadError) {
            try PlatformThread.detached { [self, weak context] in
                while waitOrStop(seconds: interval) {
                    guard let context else { break }
                    keepLeases(context)
                    take(followers.check(), context)
                }
                keeper.withLock { keeper in
                    keeper.stopped = true
                    keeperChanged.broadcast()
                }
            }
        } catch {
            preconditionFailure("cannot start the reactord.leases thread: error \(error.code)")
        }
    }

    /// Ends the lease keeper, the forwarding threads and the followers' streams (plain closes:
    /// clients resume elsewhere). The store's `close` gives the leases back.
    func stop() {
        keeper.withLock { keeper in
            keeper.stopping = true
            keeperChanged.broadcast()
        }
        keeper.withLock(waitingOn: keeperChanged, until: \.stopped) { _, _ in }
        forwarder.stop()
        followers.closeAll()
    }

    /// Gives `currentUser` every change of the global user it has not had yet, in order, once
    /// each: called after this node's own PUT /user commits, and on every wake-up of another's.
    func feedUser(_ context: ServiceContext) {
        fedUserVersion.withLock { fedUserVersion in
            let changes: [UserChange]
            do throws(StoreError) {
                changes = try store.userChanges(after: fedUserVersion)
            } catch {
                context.logger.warning(
                    "the global user could not be read from the store", metadata: ["error": "\(error)"])
                return
            }
            for change in changes where change.version > fedUserVersion {
                fedUserVersion = change.version
                let user = change.json.flatMap { try? JSONDecoder().decode(User.self, from: Data($0)) }
                // Every session's streams are resumed together at the end: see batchingResumes.
                EventStream.batchingResumes {
                    ChangeCause.with(SessionActionLog.userCause) { context.currentUser.send(user) }
                }
                context.logger.info(
                    user == nil ? "current user cleared" : "current user set",
                    metadata: ["version": "\(change.version)"].merging(user.map { ["user": "\($0.id)"] } ?? [:]) { $1 })
            }
        }
    }

    /// The holder a recent claim named for `key`, if it is still to be trusted.
    func knownHolder(of key: SessionKey) -> String? {
        let now = ProcessClock.now
        return holders.withLock { table in
            guard let known = table[key] else { return nil }
            guard known.until > now else {
                table[key] = nil
                return nil
            }
            return known.address
        }
    }

    /// Remembers `address` as `key`'s holder for a lease's length: a holder keeps a session until
    /// it dies or freezes (a forward to it then fails, and `forgetHolder` drops what is known of
    /// it) or gives it back (it then takes the forwarded request itself, the session being free).
    func remember(_ address: String, asHolderOf key: SessionKey) {
        let until = ProcessClock.now + store.leaseDuration
        holders.withLock { table in
            if table.count >= 100_000 { table.removeAll() }  // bounded; it refills from claims
            table[key] = (address, until)
        }
    }

    /// Every session known to be held at `address`: it did not answer, or no longer holds one.
    func forgetHolder(_ address: String) {
        holders.withLock { table in table = table.filter { $0.value.address != address } }
    }

    private func keepLeases(_ context: ServiceContext) {
        var lost: [String] = []
        do throws(StoreError) {
            lost = try store.renewLeases()
        } catch {
            metrics.renewFailures.increment()
            context.persistence?.failures.failed(
                error, "to renew this node's leases (its sessions are let go as they run out)")
        }
        var held = 0
        for session in context.sessions.loaded {
            // A new session holds its lease once its first write commits.
            if lost.contains(session.id) || (!session.hub.isNewSession && !store.holds(session.id)) {
                context.letGo(session)
            } else {
                held += 1
            }
        }
        metrics.sessionsHeld.set(Double(held))
    }

    /// Takes the sessions watched here that no node holds: each is then a live reactor again,
    /// which the global user's changes reach (a stream on a node that does not hold its session
    /// sees only what a holder commits). One of several nodes watching it wins the claim. On a
    /// thread of `waitingWork`, one pass at a time: the claims are round trips to the database,
    /// which must not hold up the lease renewals.
    private func take(_ unheld: [String], _ context: ServiceContext) {
        guard !unheld.isEmpty, let persistence = context.persistence, !context.isStopping else { return }
        let started = taking.withLock { busy in
            defer { busy = true }
            return !busy
        }
        guard started else { return }
        context.waitingWork.run { [self] in
            defer { taking.withLock { $0 = false } }
            let now = ProcessClock.now
            let resting = notTakenBefore.withLock { table in
                table = table.filter { $0.value > now }
                return table
            }
            for id in unheld where !context.isStopping {
                guard let key = SessionKey(id), resting[key] == nil else { continue }
                switch persistence.restore(key, into: context) {
                case let .success(session) where context.isStopping:
                    // Taken as the node stops: given back, as the stop gave back the others.
                    if context.sessions.unload(session) { context.end(session, reason: nil) }
                    store.release([id])
                case .success, .failure(.heldElsewhere), .failure(.unknown): break
                case .failure:
                    // Not to be had here now (it cannot be restored, memory is full, the store
                    // fails): not tried again for a while, rather than at every check.
                    rest(key, for: 30)
                }
            }
        }
    }

    /// `take` leaves `key` alone for `seconds`: after a hand-over, a lease (the node its requests
    /// reach takes it on its next one; taking it back would undo the hand-over).
    func rest(_ key: SessionKey, for seconds: Double? = nil) {
        let until = ProcessClock.now + (seconds ?? store.leaseDuration)
        notTakenBefore.withLock { table in
            if table.count < 10_000 { table[key] = until }
        }
    }

    /// Counts the sessions this node holds whose streams it serves through a follower (taken for
    /// them: see `take`) as used, as a session with a subscriber of its own is: not unloaded as idle.
    func touchWatched(_ context: ServiceContext) {
        let watched = followers.watchedIDs
        guard !watched.isEmpty else { return }
        for session in context.sessions.loaded where watched.contains(session.id) { session.hub.touch() }
    }

    private func waitOrStop(seconds: Double) -> Bool {
        keeper.withLock(waitingOn: keeperChanged, until: \.stopping, deadline: .after(seconds: seconds)) { keeper, _ in
            !keeper.stopping
        }
    }
}

extension ServiceContext {
    /// Placement: counts a request for `session` that reached this node (forwarded, or not); when
    /// it is time, hands the session over to the node forwarding its requests, in the background
    /// once `answered` (a lease given back costs a database round trip).
    func placeAfterRequest(_ request: Request, for session: any Session) {
        guard let cluster, cluster.placement.note(session.key, forwardedBy: request.headers[Forwarder.marker]) else {
            return
        }
        DispatchQueue.global().async { [self] in
            // Its streams here would hold it where its requests no longer come (opened before a
            // node joined, or came back): they close, and resume where the balancer sends them.
            let now = ProcessClock.now
            let closing = cluster.placement.mayCloseStreams(of: session.key, now: now)
            let watched = !session.hub.isUnwatched
            guard let persistence, sessions.unload(session, ifIdleSince: now, closingStreams: closing) else { return }
            if closing && watched { cluster.placement.didCloseStreams(of: session.key, now: now) }
            cluster.rest(session.key)
            didUnload([session], counter: cluster.metrics.handovers, persistence: persistence, handedOver: true)
        }
    }

    /// `session`'s lease is gone (another node took it over): its reactor stops here and its
    /// streams close without `event: end`, so clients resume wherever it lives now.
    func letGo(_ session: any Session) {
        guard sessions.unload(session) else { return }  // another path took it out, and ends it
        end(session, reason: nil)
        cluster?.metrics.leasesLost.increment()
        logger.notice("a session's lease passed to another node; let go here", metadata: ["session": "\(session.id)"])
    }
}
