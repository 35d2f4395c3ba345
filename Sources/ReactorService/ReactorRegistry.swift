import ReactorCore

/// The reactor kinds a server can open sessions of, by name.
final class ReactorRegistry: @unchecked Sendable {
    /// Makes a session of one kind, given its id, its hub and, when it is restored from a
    /// durable store, its stored state's JSON (throws when that no longer decodes).
    typealias Factory = (_ key: SessionKey, _ hub: EventHub, _ storedState: [UInt8]?) throws -> any Session

    private let kinds = Locked<(order: [String], factories: [String: Factory])>(([], [:]))

    func register(_ kind: String, factory: @escaping Factory) {
        kinds.withLock { kinds in
            if kinds.factories.updateValue(factory, forKey: kind) == nil { kinds.order.append(kind) }
        }
    }

    func factory(for kind: String) -> Factory? { kinds.withLock { $0.factories[kind] } }

    var names: [String] { kinds.withLock { $0.order } }
}
