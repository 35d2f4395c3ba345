import ReactorCore
import ReactorService

/// The bundled `counter`: ReactorKit's counter, with an alert pulse and the global user.
public final class CounterReactor: Reactor {
    public enum Action {
        case increase
        case decrease
        case alert(String)
        case doSomeAction
    }

    public enum Mutation {
        case increase
        case decrease
        case setAlert(String)
        case setUser(User?)
    }

    /// Codable: a durable store keeps it as the JSON it encodes to and decodes it on restore.
    public struct State: Codable {
        public var count = 0
        @Pulse public var alertMessage: String?
        public var user: User?

        public init() {}

        private enum CodingKeys: String, CodingKey { case count, alertMessage, user }

        /// Every field, `null` included: clients see the whole shape from the first event.
        /// The pulse is encoded as its wrapper (`_alertMessage`), which is how the server
        /// learns of each assignment.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(count, forKey: .count)
            try container.encode(_alertMessage, forKey: .alertMessage)
            try container.encode(user, forKey: .user)
        }

        /// The stored state back: the pulse keeps its last value, its count starts afresh
        /// (pulses that happened are events in the history, not state).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            count = try container.decode(Int.self, forKey: .count)
            _alertMessage = try container.decode(Pulse<String?>.self, forKey: .alertMessage)
            user = try container.decodeIfPresent(User.self, forKey: .user)
        }
    }

    /// Longer alert messages are cut here, before they reach every subscriber.
    public static let maxAlertLength = 1_000

    public let initialState = State()
    private let currentUser: CurrentValueSubject<User?, Never>

    public init(currentUser: CurrentValueSubject<User?, Never>) {
        self.currentUser = currentUser
    }

    public func transform(action: AnyPublisher<Action, Never>) -> AnyPublisher<Action, Never> {
        action.map { action in
            guard case let .alert(message) = action, message.count > Self.maxAlertLength else { return action }
            return .alert(String(message.prefix(Self.maxAlertLength)))
        }
        .eraseToAnyPublisher()
    }

    public func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        switch action {
        case .increase: return .just(.increase)
        case .decrease: return .just(.decrease)
        case let .alert(message): return .just(.setAlert(message))
        case .doSomeAction: return .empty
        }
    }

    /// ReactorKit's global-state pattern: every change of the user becomes a mutation.
    public func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        .merge(mutation, currentUser.map(Mutation.setUser).eraseToAnyPublisher())
    }

    public func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        // At Int's bounds the count stays: a trap in a reactor would stop the whole server.
        case .increase: state.count = Self.step(state.count, by: 1)
        case .decrease: state.count = Self.step(state.count, by: -1)
        case let .setAlert(message): state.alertMessage = message
        case let .setUser(user): state.user = user
        }
        return state
    }

    private static func step(_ count: Int, by delta: Int) -> Int {
        let (sum, overflow) = count.addingReportingOverflow(delta)
        return overflow ? count : sum
    }

    /// Where a reactor would derive or share state; the counter's passes through unchanged.
    public func transform(state: AnyPublisher<State, Never>) -> AnyPublisher<State, Never> {
        state
    }
}

extension CounterReactor.Action: Decodable {
    public init(from decoder: any Decoder) throws {
        let fields = try ActionFields(from: decoder)
        switch fields.type {
        case "increase": self = .increase
        case "decrease": self = .decrease
        case "alert": self = .alert(try fields.decode("message"))
        case "doSomeAction": self = .doSomeAction
        default: throw fields.unknownType(expected: ["increase", "decrease", "alert", "doSomeAction"])
        }
    }
}
