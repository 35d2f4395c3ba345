import ConcurrencyPrimitives
import ReactorCore

/// The reactor kinds a server can open sessions of, by name.
final class ReactorRegistry: Sendable {
    /// Makes a session of one kind, given its id, its hub, who owns it (nil without
    /// authentication) and, when it is restored from a durable store, its stored state's JSON
    /// (throws when that no longer decodes).
    typealias Factory =
        @Sendable (
            _ key: SessionKey, _ hub: EventHub, _ principal: Principal?,
            _ storedState: [UInt8]?
        ) throws -> any Session

    /// Describes a kind for the spec, from its own types (see KindDescription).
    typealias Describe = @Sendable () -> KindDescription

    private let kinds = Locked<(order: [String], factories: [String: Factory], describers: [String: Describe])>(
        ([], [:], [:]))

    func register(_ kind: String, factory: @escaping Factory, describe: @escaping Describe) {
        kinds.withLock { kinds in
            if kinds.factories.updateValue(factory, forKey: kind) == nil { kinds.order.append(kind) }
            kinds.describers[kind] = describe
        }
    }

    func factory(for kind: String) -> Factory? { kinds.withLock { $0.factories[kind] } }

    /// Every kind, in registration order, described (made anew on each call: the caller caches).
    func descriptions() -> [KindDescription] {
        let describers = kinds.withLock { kinds in kinds.order.compactMap { kinds.describers[$0] } }
        return describers.map { $0() }
    }

    var names: [String] { kinds.withLock { $0.order } }
}
