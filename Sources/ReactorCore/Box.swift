// Two costs of unspecialised generic code dominate an action (callgrind): runtime
// metadata lookups and dynamic exclusivity checks. Hence `Box` below, non-generic
// conduit base classes, and `@exclusivity(unchecked)` on stored properties that a lock or
// the reactor's gate already guards (the dynamic check cost ~20% of an action).

/// A class box around a generic value. Unspecialised generic code (all of this library,
/// as seen from a client module) pays a runtime metadata lookup for every `T?` of an
/// unconstrained `T`; an optional *class* reference needs none. So subscriptions keep
/// their downstream as `Box<Downstream>?` and let go of it by setting nil.
final class Box<Value> {
    let value: Value
    init(_ value: Value) { self.value = value }
}
