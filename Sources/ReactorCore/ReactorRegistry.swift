internal import ConcurrencyPrimitives
import Dispatch

/// Finds a reactor's storage by the reactor's identity (Linux has no associated objects),
/// and notices released reactors.
///
/// Swift gives no callback when an object is deallocated, so a release watcher sweeps:
/// every `interval` it checks the reactors that have effects running (so those effects
/// are cancelled within about one interval of the release) and a slice of all others (so
/// an idle released reactor's pipeline, say its subscription to a global current user,
/// is freed within a few seconds even if no value ever reaches it). A released reactor
/// is also noticed at once by any action, mutation or lookup that reaches its storage.
final class ReactorRegistry {
    static let shared = ReactorRegistry()

    /// How often the watcher sweeps.
    static let interval = DispatchTimeInterval.milliseconds(20)
    /// How many idle reactors one sweep checks.
    static let sliceSize = 2_048

    private let lock = Mutex()
    private var storages: [ObjectIdentifier: AnyReactorStorage] = [:]
    private var sweepList: ContiguousArray<AnyReactorStorage> = []
    private var withEffects: [ObjectIdentifier: AnyReactorStorage] = [:]
    private var cursor = 0
    private var timer: DispatchSourceTimer?
    private let queue = DispatchQueue(label: "ReactorCore.ReleaseWatcher")

    /// The storage of `reactor`, made on first use.
    func storage<R: Reactor>(for reactor: R) -> ReactorStorage<R.Action, R.Mutation, R.State> {
        storage(for: reactor, startingFrom: nil).storage
    }

    /// The storage of `reactor`; when this call makes it, its pipeline starts from `state`
    /// (`initialState` when nil). `made` tells whether it did.
    func storage<R: Reactor>(for reactor: R, startingFrom state: R.State?)
        -> (storage: ReactorStorage<R.Action, R.Mutation, R.State>, made: Bool)
    {
        let key = ObjectIdentifier(reactor)
        while true {
            if let existing = lock.withLock({ storages[key] }) {
                if existing.isOwned(by: reactor) {
                    return (unsafeDowncast(existing, to: ReactorStorage<R.Action, R.Mutation, R.State>.self), false)
                }
                // A released reactor's storage under a reused address.
                existing.teardown()
                remove(existing)
                continue
            }
            // Made outside the lock: it reads `initialState`, user code.
            let made = ReactorStorage(reactor, startingFrom: state)
            let winner = lock.withLock { () -> AnyReactorStorage in
                if let raced = storages[key] { return raced }
                storages[key] = made
                made.sweepIndex = sweepList.count
                sweepList.append(made)
                startWatchingIfNeeded()
                return made
            }
            if winner === made { return (made, true) }
        }
    }

    var count: Int { lock.withLock { storages.count } }

    func remove(_ storage: AnyReactorStorage) {
        lock.withLock {
            guard storages[storage.key] === storage else { return }
            storages[storage.key] = nil
            withEffects[storage.key] = nil
            let index = storage.sweepIndex
            let last = sweepList.count - 1
            if index != last {
                sweepList[index] = sweepList[last]
                sweepList[index].sweepIndex = index
            }
            sweepList.removeLast()
            storage.sweepIndex = -1
        }
    }

    func watchEffects(_ storage: AnyReactorStorage) {
        lock.withLock {
            if storages[storage.key] === storage { withEffects[storage.key] = storage }
        }
    }

    // MARK: Release watcher

    private func startWatchingIfNeeded() {
        guard timer == nil else { return }
        let made = DispatchSource.makeTimerSource(queue: queue)
        made.schedule(
            deadline: .now() + Self.interval, repeating: Self.interval,
            leeway: .milliseconds(5))
        made.setEventHandler { [unowned self] in sweep() }
        timer = made
        made.resume()
    }

    /// One sweep: reactors with running effects, then the next slice of the rest.
    func sweep() {
        let (effectful, slice) = lock.withLock { () -> ([AnyReactorStorage], [AnyReactorStorage]) in
            if storages.isEmpty {
                timer?.cancel()
                timer = nil
                return ([], [])
            }
            var slice: [AnyReactorStorage] = []
            let n = min(sweepList.count, Self.sliceSize)
            slice.reserveCapacity(n)
            for _ in 0..<n {
                if cursor >= sweepList.count { cursor = 0 }
                slice.append(sweepList[cursor])
                cursor += 1
            }
            return (Array(withEffects.values), slice)
        }
        for storage in effectful {
            if !storage.isReactorAlive {
                storage.teardown()
            } else if !storage.hasRunningEffects {
                // Re-checked under the lock: an effect may have started meanwhile.
                lock.withLock {
                    if !storage.hasRunningEffects { withEffects[storage.key] = nil }
                }
            }
        }
        for storage in slice where !storage.isReactorAlive {
            storage.teardown()
        }
    }
}
