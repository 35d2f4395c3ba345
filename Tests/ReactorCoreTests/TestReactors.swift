import ReactorCore

/// The counter of the issue, verbatim apart from `reduce`'s body.
final class CounterReactor: Reactor {
    enum Action: Equatable { case increase, alert(String), doSomeAction }
    enum Mutation { case increase, setAlert(String), setUser(String?) }
    struct State: Codable, Equatable {
        var count = 0
        @Pulse var alertMessage: String? = nil
        var user: String? = nil
    }

    let initialState = State()
    let currentUser: CurrentValueSubject<String?, Never>

    init(currentUser: CurrentValueSubject<String?, Never>) { self.currentUser = currentUser }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        switch action {
        case .increase: return .just(.increase)
        case let .alert(message): return .just(.setAlert(message))
        case .doSomeAction: return .empty
        }
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case .increase: state.count += 1
        case let .setAlert(message): state.alertMessage = message
        case let .setUser(user): state.user = user
        }
        return state
    }

    func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        .merge(mutation, currentUser.map(Mutation.setUser).eraseToAnyPublisher())
    }
}

/// Records the stage of the pipeline each value went through (ReactorKit's own test).
final class StageReactor: Reactor {
    typealias Action = [String]
    typealias Mutation = [String]
    typealias State = [String]

    let initialState: State = []

    func transform(action: AnyPublisher<Action, Never>) -> AnyPublisher<Action, Never> {
        action.map { $0 + ["transformedAction"] }.eraseToAnyPublisher()
    }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        .just(action + ["mutation"])
    }

    func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        mutation.map { $0 + ["transformedMutation"] }.eraseToAnyPublisher()
    }

    func reduce(state: State, mutation: Mutation) -> State {
        state + mutation + ["reduce"]
    }

    func transform(state: AnyPublisher<State, Never>) -> AnyPublisher<State, Never> {
        state.map { $0 + ["transformedState"] }.eraseToAnyPublisher()
    }
}

/// Two-step actions that log "enter"/"exit"; used for re-entrancy (ReactorKit #260).
final class LogReactor: Reactor {
    enum Action { case a, b }
    enum Mutation { case enter(String), exit(String) }
    struct State { var log: [String] = [] }

    let initialState = State()
    /// Called from inside `reduce` on the first "enter A".
    var onEnterA: ((LogReactor) -> Void)?

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        let name = action == .a ? "A" : "B"
        return .concat(.just(.enter(name)), .just(.exit(name)))
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case let .enter(name):
            state.log.append("enter \(name)")
            if name == "A", let hook = onEnterA {
                onEnterA = nil
                hook(self)
            }
        case let .exit(name):
            state.log.append("exit \(name)")
        }
        return state
    }
}
