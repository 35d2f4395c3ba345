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
// why: every caller gets the storage it keeps, which the release watcher tears down; in a Guarded: "type 'AnyReactorStorage' does not conform to the 'Sendable' protocol".
final class ReactorRegistry: @unchecked Sendable {
    static let shared = ReactorRegistry()

    /// How often the watcher sweeps.
    static let interval = DispatchTimeInterval.milliseconds(20)
    /// How many idle reactors one sweep checks.
    static let sliceSize = 2_048

    /// What the registry knows, behind its mutex.
    private struct Shelf {
        var storages: [ObjectIdentifier: AnyReactorStorage] = [:]
        var sweepList: ContiguousArray<AnyReactorStorage> = []
        var withEffects: [ObjectIdentifier: AnyReactorStorage] = [:]
        var cursor = 0
        var timer: DispatchSourceTimer?
    }

    private let shelf = Locked(Shelf())
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
            if let existing = shelf.withLock({ $0.storages[key] }) {
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
            let winner = shelf.withLock { shelf -> AnyReactorStorage in
                if let raced = shelf.storages[key] { return raced }
                shelf.storages[key] = made
                made.sweepIndex = shelf.sweepList.count
                shelf.sweepList.append(made)
                startWatchingIfNeeded(&shelf)
                return made
            }
            if winner === made { return (made, true) }
        }
    }

    /// The storage of `reactor` if it has one; none is made.
    func existingStorage(of reactor: some Reactor) -> AnyReactorStorage? {
        guard let existing = shelf.withLock({ $0.storages[ObjectIdentifier(reactor)] }),
            existing.isOwned(by: reactor)
        else { return nil }
        return existing
    }

    var count: Int { shelf.withLock { $0.storages.count } }

    func remove(_ storage: AnyReactorStorage) {
        shelf.withLock { shelf in
            guard shelf.storages[storage.key] === storage else { return }
            shelf.storages[storage.key] = nil
            shelf.withEffects[storage.key] = nil
            let index = storage.sweepIndex
            let last = shelf.sweepList.count - 1
            if index != last {
                shelf.sweepList[index] = shelf.sweepList[last]
                shelf.sweepList[index].sweepIndex = index
            }
            shelf.sweepList.removeLast()
            storage.sweepIndex = -1
        }
    }

    func watchEffects(_ storage: AnyReactorStorage) {
        shelf.withLock { shelf in
            if shelf.storages[storage.key] === storage { shelf.withEffects[storage.key] = storage }
        }
    }

    // MARK: Release watcher

    private func startWatchingIfNeeded(_ shelf: inout Shelf) {
        guard shelf.timer == nil else { return }
        let made = DispatchSource.makeTimerSource(queue: queue)
        made.schedule(
            deadline: .now() + Self.interval, repeating: Self.interval,
            leeway: .milliseconds(5))
        made.setEventHandler { [unowned self] in sweep() }
        shelf.timer = made
        made.resume()
    }

    /// One sweep: reactors with running effects, then the next slice of the rest.
    func sweep() {
        let (effectful, slice) = shelf.withLock { shelf -> ([AnyReactorStorage], [AnyReactorStorage]) in
            if shelf.storages.isEmpty {
                shelf.timer?.cancel()
                shelf.timer = nil
                return ([], [])
            }
            var slice: [AnyReactorStorage] = []
            let n = min(shelf.sweepList.count, Self.sliceSize)
            slice.reserveCapacity(n)
            for _ in 0..<n {
                if shelf.cursor >= shelf.sweepList.count { shelf.cursor = 0 }
                slice.append(shelf.sweepList[shelf.cursor])
                shelf.cursor += 1
            }
            return (Array(shelf.withEffects.values), slice)
        }
        for storage in effectful {
            if !storage.isReactorAlive {
                storage.teardown()
            } else if !storage.hasRunningEffects {
                // Re-checked under the lock: an effect may have started meanwhile.
                shelf.withLock { shelf in
                    if !storage.hasRunningEffects { shelf.withEffects[storage.key] = nil }
                }
            }
        }
        for storage in slice where !storage.isReactorAlive {
            storage.teardown()
        }
    }
}
