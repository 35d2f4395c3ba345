import ReactorCore
import ReactorService
import ReactorServiceCLI

/// A todo list: an async effect, a pulse, and the global user merged into every session.
final class TodoReactor: Reactor {
    enum Action { case add(title: String), toggle(index: Int), clear, load }
    enum Mutation { case add(String), toggle(Int), clear, setLoading(Bool), setUser(User?) }

    struct Item: Codable { var title: String; var done = false }
    struct State: Codable {                // Codable: the sessions survive a restart (see Durable sessions)
        var items: [Item] = []
        var loading = false
        var user: User?              // nil until someone PUTs /user (left out of the JSON while nil)
        @Pulse var toast: String?    // every assignment is a `pulse` event, equal values too
    }

    let initialState = State()
    private let currentUser: CurrentValueSubject<User?, Never>

    init(currentUser: CurrentValueSubject<User?, Never>) { self.currentUser = currentUser }

    func mutate(action: Action) -> AnyPublisher<Mutation, Never> {
        switch action {
        case let .add(title): return .just(.add(title))
        case let .toggle(index): return .just(.toggle(index))
        case .clear: return .just(.clear)
        case .load:
            // An async effect: runs in a task, its mutations are reduced as they arrive.
            return .concat(.just(.setLoading(true)), .run { send in
                try? await Task.sleep(nanoseconds: 50_000_000)   // stands for a network call
                await send(.add("loaded"))
                await send(.setLoading(false))
            })
        }
    }

    // The global user reaches every session as a mutation.
    func transform(mutation: AnyPublisher<Mutation, Never>) -> AnyPublisher<Mutation, Never> {
        .merge(mutation, currentUser.map(Mutation.setUser).eraseToAnyPublisher())
    }

    func reduce(state: State, mutation: Mutation) -> State {
        var state = state
        switch mutation {
        case let .add(title):
            state.items.append(Item(title: title))
            state.toast = "added \(title)"
        case let .toggle(index):
            if state.items.indices.contains(index) { state.items[index].done.toggle() }
        case .clear: state.items = []
        case let .setLoading(loading): state.loading = loading
        case let .setUser(user): state.user = user
        }
        return state
    }
}

// The wire form: {"type": "add", "title": "milk"}.
extension TodoReactor.Action: Decodable {
    init(from decoder: any Decoder) throws {
        let fields = try ActionFields(from: decoder)
        switch fields.type {
        case "add": self = .add(title: try fields.decode("title"))
        case "toggle": self = .toggle(index: try fields.decode("index"))
        case "clear": self = .clear
        case "load": self = .load
        default: throw fields.unknownType(expected: ["add", "toggle", "clear", "load"])
        }
    }
}

// reactord's flags, REACTORD_* variables, --help, logging and signals, for this binary.
ReactorServer.main { server in
    server.register("todo") { currentUser in TodoReactor(currentUser: currentUser) }
}
