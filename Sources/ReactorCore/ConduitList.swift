/// A subject's subscribers in the order they came, in one word: a reactor's own subjects have
/// one subscriber each, held in place (an array for it was one more allocation per subject).
/// Not thread-safe: its owner guards it (and copies it under that guard to deliver).
struct ConduitList<Conduit: AnyObject> {
    fileprivate enum Storage {
        case empty
        case one(Conduit)
        case many(ContiguousArray<Conduit>)
    }

    private var storage = Storage.empty

    mutating func append(_ conduit: Conduit) {
        switch storage {
        case .empty:
            storage = .one(conduit)
        case let .one(first):
            storage = .many([first, conduit])
        case var .many(all):
            storage = .empty  // so that `all` is the array's only holder: appended in place
            all.append(conduit)
            storage = .many(all)
        }
    }

    /// Removes `conduit` (by identity), keeping the others' order.
    mutating func remove(_ conduit: Conduit) {
        switch storage {
        case .empty:
            break
        case let .one(first):
            if first === conduit { storage = .empty }
        case var .many(all):
            storage = .empty
            all.removeAll { $0 === conduit }
            storage = .many(all)
        }
    }
}

extension ConduitList: Sequence {
    /// The conduits in order.
    struct Iterator: IteratorProtocol {
        fileprivate let storage: Storage
        fileprivate var index = 0

        mutating func next() -> Conduit? {
            defer { index += 1 }
            switch storage {
            case .empty: return nil
            case let .one(conduit): return index == 0 ? conduit : nil
            case let .many(all): return index < all.count ? all[index] : nil
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(storage: storage) }
}
