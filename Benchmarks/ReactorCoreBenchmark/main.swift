// ReactorCore benchmark: one run prints every figure of issue 2, one line each.
//   swift run -c release --scratch-path .build-core ReactorCoreBenchmark
import Dispatch
import Foundation
import ReactorCore

#if canImport(Glibc)
import Glibc
#endif

/// The counter of the issue.
final class CounterReactor: Reactor {
    enum Action { case increase, alert(String), doSomeAction }
    enum Mutation { case increase, setAlert(String), setUser(String?) }
    struct State {
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

func seconds(_ body: () -> Void) -> Double {
    let start = DispatchTime.now().uptimeNanoseconds
    body()
    return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
}

/// Best of `rounds` runs of `count` iterations, in operations per second.
func rate(count: Int, rounds: Int = 3, _ body: (Int) -> Void) -> Double {
    body(count / 10)  // warm-up
    var best = 0.0
    for _ in 0..<rounds {
        best = max(best, Double(count) / seconds { body(count) })
    }
    return best
}

func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

func line(_ name: String, _ value: Double, _ unit: String, target: String = "") {
    let number = value >= 100 ? String(format: "%.0f", value) : String(format: "%.2f", value)
    print("\(name): \(number) \(unit)\(target.isEmpty ? "" : "  (target \(target))")")
}

let actions = 1_000_000

// `--profile-actions`: only the one-thread action loop, for callgrind.
if CommandLine.arguments.contains("--profile-actions") {
    let reactor = CounterReactor(currentUser: CurrentValueSubject("jay"))
    for _ in 0..<200_000 { reactor.action.send(.increase) }
    print(reactor.currentState.count)
    exit(0)
}
if CommandLine.arguments.contains("--profile-broadcast") {
    let user = CurrentValueSubject<String?, Never>("jay")
    let reactors = (0..<20_000).map { _ in CounterReactor(currentUser: user) }
    for reactor in reactors { _ = reactor.currentState }
    for i in 0..<5 { user.send("user\(i)") }
    print(reactors[0].currentState.user ?? "")
    exit(0)
}
if CommandLine.arguments.contains("--profile-reference") {
    let subject = PassthroughSubject<CounterReactor.Action, Never>()
    let reference = CurrentValueSubject<CounterReactor.State, Never>(CounterReactor.State())
    let reducer = CounterReactor(currentUser: CurrentValueSubject("jay"))
    let pipeline =
        subject
        .flatMap { _ in Just(CounterReactor.Mutation.increase) }
        .scan(CounterReactor.State()) { reducer.reduce(state: $0, mutation: $1) }
        .subscribe(reference)
    for _ in 0..<200_000 { subject.send(.increase) }
    print(reference.value.count)
    pipeline.cancel()
    exit(0)
}

// 1. Actions per second through the counter, one thread.
let user = CurrentValueSubject<String?, Never>("jay")
let reactor = CounterReactor(currentUser: user)
let reactorRate = rate(count: actions) { n in
    for _ in 0..<n { reactor.action.send(.increase) }
}
precondition(reactor.currentState.count > 0)

var delivered = 0
let sink = reactor.state.sink { delivered = $0.count }
let withSubscriberRate = rate(count: actions) { n in
    for _ in 0..<n { reactor.action.send(.increase) }
}
sink.cancel()
precondition(delivered == reactor.currentState.count)

// 2. The same shape, bare OpenCombine: subject → flatMap(Just) → scan → CurrentValueSubject.
let subject = PassthroughSubject<CounterReactor.Action, Never>()
let reference = CurrentValueSubject<CounterReactor.State, Never>(CounterReactor.State())
let referenceReactor = CounterReactor(currentUser: user)
let referencePipeline =
    subject
    .flatMap { action -> Just<CounterReactor.Mutation> in
        switch action {
        case .increase: return Just(.increase)
        case let .alert(message): return Just(.setAlert(message))
        case .doSomeAction: return Just(.setUser(nil))
        }
    }
    .scan(CounterReactor.State()) { referenceReactor.reduce(state: $0, mutation: $1) }
    .subscribe(reference)
let referenceRate = rate(count: actions) { n in
    for _ in 0..<n { subject.send(.increase) }
}
precondition(reference.value.count > 0)
referencePipeline.cancel()

line("actions/s, CounterReactor, one thread", reactorRate, "actions/s", target: ">= 400000")
line("actions/s, CounterReactor with one state subscriber", withSubscriberRate, "actions/s")
line(
    "actions/s, bare OpenCombine reference (subject→flatMap(Just)→scan→CurrentValueSubject)", referenceRate, "actions/s"
)
line("ratio CounterReactor / reference", reactorRate / referenceRate, "x", target: ">= 0.5")

// 3. Bytes per idle reactor, 100,000 kept alive with their pipelines built.
let count = 100_000
let broadcastUser = CurrentValueSubject<String?, Never>("jay")
let rssBefore = residentBytes()
var reactors: [CounterReactor] = []
reactors.reserveCapacity(count)
let creation = seconds {
    for _ in 0..<count {
        let made = CounterReactor(currentUser: broadcastUser)
        _ = made.currentState  // builds the pipeline, subscribes to the user
        reactors.append(made)
    }
}
let rssAfter = residentBytes()
line(
    "bytes per idle reactor (RSS, /proc/self/statm)", Double(rssAfter - rssBefore) / Double(count), "bytes",
    target: "<= 4096")
line("time to create 100,000 reactors", creation * 1000, "ms")

// 4. One currentUser change delivered to 100,000 reactors.
var broadcasts: [Double] = []
for round in 0..<5 {
    let name = "user\(round)"
    broadcasts.append(seconds { broadcastUser.send(name) })
    precondition(reactors.allSatisfy { $0.currentState.user == name })
}
broadcasts.sort()
line(
    "broadcast of one currentUser change to 100,000 reactors (median of 5)", broadcasts[2] * 1000, "ms",
    target: "<= 200")
line("broadcast, best of 5", broadcasts[0] * 1000, "ms")

// 5. Releasing them frees their pipelines (the release watcher sweeps).
reactors.removeAll()
broadcastUser.send("after release")  // reaches only dead pipelines, which tear down
usleep(200_000)
line(
    "reactors still registered 200 ms after releasing them", Double(ReactorDiagnostics.registeredReactorCount),
    "reactors")
