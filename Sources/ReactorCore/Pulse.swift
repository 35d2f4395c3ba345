/// A state property whose every assignment is an event, even of an equal value (an
/// alert shown twice with the same text), as ReactorKit's `@Pulse`.
///
///     struct State { @Pulse var alertMessage: String? }
///     reactor.pulse(\.$alertMessage).sink { message in ... }
///
/// `valueUpdatedCount` grows by one on every assignment, wrapping to 0 after `UInt.max`;
/// `reactor.pulse(_:)` emits when it changes.
///
/// Codable as its bare value: a state with `@Pulse var alertMessage: String?` encodes as
/// `"alertMessage": "Hello"` (or `null`); decoding starts the count at 0.
@propertyWrapper
public struct Pulse<Value> {
    /// The current value; every assignment counts.
    public var value: Value {
        didSet { valueUpdatedCount &+= 1 }
    }

    /// How many times `value` was assigned (wrapping). Settable for tests.
    public var valueUpdatedCount: UInt = 0

    /// A pulse holding `wrappedValue`, never assigned yet (`valueUpdatedCount` is 0).
    public init(wrappedValue: Value) {
        value = wrappedValue
    }

    /// The property's value, `value`; every assignment counts.
    public var wrappedValue: Value {
        get { value }
        set { value = newValue }
    }

    /// `$name` is the pulse itself, for `reactor.pulse(\.$name)`.
    public var projectedValue: Pulse<Value> { self }
}

/// Two pulses are equal when their values are equal and they were assigned equally
/// often: a re-assigned equal value is a new event, so `removeDuplicates()` on a state
/// keeps it.
extension Pulse: Equatable where Value: Equatable {}

extension Pulse: Hashable where Value: Hashable {}

extension Pulse: Sendable where Value: Sendable {}

extension Pulse: Encodable where Value: Encodable {
    /// Encodes the bare value, and tells a pulse observer, if the encoder has one, where
    /// the pulse was and how often it was assigned.
    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
        if let recorder = ThreadContext.current.pulseRecorder,
            recorder.record(pulseIn: encoder, updatedCount: valueUpdatedCount, value: value)
        {
            return
        }
        let observer =
            (encoder as? any PulseObservingEncoder)?.pulseObserver
            ?? encoder.userInfo[.pulseObserver] as? PulseEncodingObserver
        if let observer {
            observer.didEncodePulse(at: encoder.codingPath, updatedCount: valueUpdatedCount, value: value)
        }
    }
}

extension Pulse: Decodable where Value: Decodable {
    /// Decodes the bare value; the count starts at 0.
    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        self.init(wrappedValue: try container.decode(Value.self))
    }
}

extension Reactor {
    /// The values of a pulse, emitted when it is assigned (its `valueUpdatedCount`
    /// changes), equal values included: ReactorKit's
    /// `state.map(keyPath).distinctUntilChanged(\.valueUpdatedCount).map(\.value)`.
    ///
    /// On subscribe, the state stream replays the current state. Its pulse is emitted
    /// only if it was ever assigned (count ≠ 0): a subscriber made before any action sees
    /// only the assigned values (ReactorKit's documented case: alert("Hello") twice,
    /// doSomeAction, alert("Hello"), alert("tokijh") → exactly Hello, Hello, Hello,
    /// tokijh, without the initial nil), while one made later still gets the last
    /// assigned value, as in ReactorKit.
    public func pulse<Result>(_ keyPath: KeyPath<State, Pulse<Result>>) -> AnyPublisher<Result, Never> {
        pulse { $0[keyPath: keyPath] }
    }

    /// The values of the pulse `transformToPulse` picks from the state; see `pulse(_:)`.
    public func pulse<Result>(_ transformToPulse: @escaping (State) -> Pulse<Result>) -> AnyPublisher<Result, Never> {
        state
            .map { state -> (count: UInt, value: Result?) in
                let pulse = transformToPulse(state)
                return (pulse.valueUpdatedCount, pulse.value)
            }
            // A never-assigned pulse (count 0) compares equal to this seed and is dropped.
            .prepend((count: 0, value: nil))
            .removeDuplicates { $0.count == $1.count }
            .dropFirst()  // the seed
            .map { $0.value! }  // only the seed has no value
            .eraseToAnyPublisher()
    }
}
