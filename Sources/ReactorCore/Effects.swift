/// Effects, the publishers `mutate` returns, spelled as in ReactorKit:
///
///     case .increase:  return .just(.increase)
///     case .refresh:   return .concat(.just(.setLoading(true)), load, .just(.setLoading(false)))
///     case .load:      return .run { send in await send(.setItems(try? await api.items())) }
///     case .nothing:   return .empty
extension AnyPublisher where Failure == Never {
    /// One value, then finished. (Inlinable: specialised in the caller, it skips the
    /// runtime metadata lookups unspecialised generic code pays on every call.)
    @inlinable
    public static func just(_ output: Output) -> AnyPublisher<Output, Never> {
        JustEffect(output).eraseToAnyPublisher()
    }

    /// Finishes at once, with no value.
    @inlinable
    public static var empty: AnyPublisher<Output, Never> {
        EmptyEffect().eraseToAnyPublisher()
    }

    /// An async effect: `operation` runs in a task and emits with `await send(value)`;
    /// the effect finishes when `operation` returns. Cancelling the subscription (which
    /// happens when the reactor is released) cancels the task, and `send` drops values
    /// once the task is cancelled.
    public static func run(
        priority: TaskPriority? = nil,
        _ operation: @escaping @Sendable (Send<Output>) async -> Void
    ) -> AnyPublisher<Output, Never> {
        RunPublisher(priority: priority, operation: operation).eraseToAnyPublisher()
    }
}

extension AnyPublisher {
    /// The values of all `publishers`, as they come; finishes when all have finished,
    /// fails when one fails (cancelling the others).
    public static func merge(_ publishers: AnyPublisher<Output, Failure>...) -> AnyPublisher<Output, Failure> {
        merge(publishers)
    }

    /// The values of all `publishers`, as they come; see `merge(_:)`.
    public static func merge(_ publishers: [AnyPublisher<Output, Failure>]) -> AnyPublisher<Output, Failure> {
        if publishers.count == 1 { return publishers[0] }
        return MergePublisher(publishers).eraseToAnyPublisher()
    }

    /// The values of each of `publishers` in turn: the next is subscribed when the one
    /// before has finished.
    public static func concat(_ publishers: AnyPublisher<Output, Failure>...) -> AnyPublisher<Output, Failure> {
        concat(publishers)
    }

    /// The values of each of `publishers` in turn; see `concat(_:)`.
    public static func concat(_ publishers: [AnyPublisher<Output, Failure>]) -> AnyPublisher<Output, Failure> {
        if publishers.count == 1 { return publishers[0] }
        return ConcatPublisher(publishers).eraseToAnyPublisher()
    }
}
