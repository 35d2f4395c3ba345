import ReactorCore
import ReactorService

final class TodoReactor: Reactor {
    enum Action { case add(String), clear }
    struct State: Encodable { var items: [String] = []; @Pulse var toast: String? }
    let initialState = State()

    func reduce(state: State, mutation: Action) -> State {
        var state = state
        switch mutation {
        case let .add(item): state.items.append(item); state.toast = "added \(item)"
        case .clear: state.items = []
        }
        return state
    }
}

extension TodoReactor.Action: Decodable {
    init(from decoder: any Decoder) throws {
        let fields = try ActionFields(from: decoder)
        switch fields.type {
        case "add": self = .add(try fields.decode("item"))
        case "clear": self = .clear
        default: throw fields.unknownType(expected: ["add", "clear"])
        }
    }
}

// The README's lower-level example (ServiceConfiguration, register, run), as it was before
// ReactorServiceCLI: it compiled in Swift 6 mode and trapped on the first POST /sessions.
var configuration = ServiceConfiguration()       // 127.0.0.1:8080 and the defaults above
configuration.port = 0                            // any free port; the log says which
let server = ReactorServer(configuration: configuration)
server.register("todo") { _ in TodoReactor() }   // the closure gets the global currentUser
try server.run()                                  // until SIGINT or SIGTERM
