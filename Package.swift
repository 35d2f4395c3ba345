// swift-tools-version:6.2
import Foundation
import PackageDescription

// Swift 6 language mode for every target (issue 30) but three test targets, each of which says
// why below (`swiftLanguageMode(.v5)`). ReactorCore and ReactorService took these decisions:
// - `ReactorServer.register` requires `SendableMetatype` (SE-0470) of the reactor's class and of
//   its `Action` and `State`: the server names them on the threads that serve requests. Every
//   concrete type is one (a generic reactor's bare type parameter is not, unless constrained);
//   neither a reactor nor its values need to be Sendable. `Reactor` itself requires nothing new:
//   ReactorCore alone does not need it.
// - A reactor is used from any thread under its serial gate, which the compiler cannot see; two
//   `@unchecked Sendable` say so, each with the error the compiler gave with its state in `Guarded`
//   (ConcurrencyPrimitives' box in the way of `Synchronization.Mutex`: values go in only as
//   `sending`, results come out only if Sendable). No design removes them without changing what
//   they do, as neither's values are ever one caller's alone:
//   - ReactorCore's ReactorRegistry hands the storage it keeps to every caller of `reactor.action`,
//     on any thread, and its release watcher tears storages down on its own queue: "type
//     'AnyReactorStorage' does not conform to the 'Sendable' protocol" (a storage taken out of the
//     lock). With `sending` results instead (as `Mutex` has), storing one made from the caller's
//     reactor gives "'inout sending' parameter 'shelf' cannot be task-isolated at end of function",
//     and handing it back "returning a task-isolated 'ReactorStorage<R.Action, R.Mutation,
//     R.State>' value as a 'sending' result risks causing data races". Only a Sendable storage
//     would do, which is the gate's claim again.
//   - `.run`'s RunSubscription gets its subscriber from OpenCombine's `receive(subscriber:)`, a
//     plain parameter (a `sending` one no longer witnesses `Publisher`), and its task calls that
//     subscriber outside the state's lock (the subscriber calls back `request`): "type
//     'Box<Downstream>' does not conform to the 'Sendable' protocol" (the subscriber taken out),
//     and "sending value of non-Sendable type 'RunSubscription<Downstream>.State' risks causing
//     data races" (the subscriber put in). `sending` on `Send.callAsFunction` would make the
//     values checkable, not the subscriber: not done.
//   ReactorService's ReactorSession is checked: it holds its reactor in a `Guarded`, which the
//   reactor enters whole (`sending`, from the kind's factory), and so does each action, decoded
//   by the session for the route and handed back to it whole (`Session.perform`). Everything else
//   holding state that is not Sendable keeps it in a `Guarded` (EventHub, ReactorSession) or a
//   `Locked`; the other remaining `@unchecked` are the lock primitives and the types that wrap C
//   handles.
// - OpenCombine marks nothing Sendable: ReactorService imports it `@preconcurrency` where the
//   global user's subject crosses threads (OpenCombine's subjects lock themselves).
// - JSONDecoder/JSONEncoder want Sendable `userInfo`: the action route keeps `[_: any Sendable]`
//   (its fast decoder copies it to `[_: Any]` only when a decoder reads `userInfo`, which the
//   common request does not), and the pulse collector hears of pulses through the thread's
//   PulseRecording instead of `userInfo`.
// Thread safety beyond what the compiler checks is shown by the tests under --sanitize=thread.
let package = Package(
    name: "reactord",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "ReactorCore", targets: ["ReactorCore"]),
        .library(name: "MicroHTTP", targets: ["MicroHTTP"]),
        .library(name: "ReactorService", targets: ["ReactorService"]),
        .library(name: "ReactorServiceCLI", targets: ["ReactorServiceCLI"]),
        .library(name: "ReactorClient", targets: ["ReactorClient"]),
        .executable(name: "reactord", targets: ["reactord"]),
    ],
    dependencies: [
        .package(url: "https://github.com/OpenCombine/OpenCombine.git", from: "0.14.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        // `Service`, so that a ReactorServer runs in a ServiceGroup beside a program's other
        // services; it brings swift-async-algorithms and swift-collections (BENCHMARKS.md, "Build").
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .target(
            name: "ReactorCore",
            dependencies: [
                "ConcurrencyPrimitives",
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android])),
            ]),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        // Interposes libmicrohttpd's MHD_queue_response, so that the answers it makes itself (414,
        // 431, ...) can be MicroHTTP's own, with the server's fields (MicroHTTP/OwnAnswers.swift).
        // Linked by what serves reactord (ReactorService), not by MicroHTTP: a binary that only
        // links MicroHTTP keeps libmicrohttpd's function as it is.
        .target(name: "CMicroHTTPDOwnAnswers", dependencies: ["CMicroHTTPD"]),
        // Defines `recv`, so that a client's end of stream read while a deferred answer is pending
        // waits until that answer is queued (libmicrohttpd 0.9.75 closed without one): see
        // half_close.h. Linked by MicroHTTP, so by any binary that serves with it: such a binary
        // cannot define a `recv` of its own (every call passes through to the C library's).
        .target(name: "CMicroHTTPDHalfClose"),
        // The package's one mutex, condition, lock boxes and thread start (pthreads, no Foundation):
        // `package` API for the other targets, in no product.
        .target(name: "ConcurrencyPrimitives"),
        .target(
            name: "MicroHTTP", dependencies: ["ConcurrencyPrimitives", "CMicroHTTPD", "CMicroHTTPDHalfClose"]),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq, PostgreSQL's own client: blocking calls suit the store's writer thread, and
        // its URI passes sslmode and the rest straight through; no package to build.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // OpenSSL's libcrypto, the system's: JWT signatures are checked with it rather than with
        // swift-crypto, whose BoringSSL was ~370 of the release build's 394 compile steps.
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The typed wall over CLibCrypto: exactly what JWS verification needs (HS256, RS256,
        // ES256, public keys from PEM); `package` API, not part of any product's.
        .target(name: "JWSSignatures", dependencies: ["CLibCrypto"]),
        // The store seam and its engines; SQL lives here and nowhere else.
        .target(
            name: "ReactorStore", dependencies: ["ConcurrencyPrimitives", "CSQLite", "CLibPQ"]),
        .target(
            name: "ReactorService",
            dependencies: [
                "ConcurrencyPrimitives", "ReactorCore", "MicroHTTP", "CMicroHTTPDOwnAnswers", "ReactorStore",
                "JWSSignatures",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // Imported itself (`@preconcurrency`) where `currentUser` crosses threads.
                .product(
                    name: "OpenCombine", package: "OpenCombine",
                    condition: .when(platforms: [.linux, .windows, .android])),
            ],
            // Embedded in the code, not a bundle: a bundle's accessor needs all of Foundation,
            // whose ICU data alone is 34 MB of the static binary (FoundationEssentials suffices).
            resources: [
                .embedInCode("Resources/index.html"), .embedInCode("Resources/console.html"),
                .embedInCode("Resources/openapi.yaml"),
            ]),
        .target(
            name: "Examples", dependencies: ["ReactorCore", "ReactorService"]),
        // Foundation only (FoundationNetworking on Linux) and the package's lock box: no server
        // code in an app.
        .target(
            name: "ReactorClient", dependencies: ["ConcurrencyPrimitives"]),
        // reactord's command line (flags, REACTORD_* variables, logging), for any server binary.
        .target(
            name: "ReactorServiceCLI",
            dependencies: [
                "ConcurrencyPrimitives", "ReactorService", "MicroHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(name: "reactord", dependencies: ["ReactorServiceCLI", "Examples"]),
        .executableTarget(
            name: "ReactorCoreBenchmark", dependencies: ["ReactorCore"], path: "Benchmarks/ReactorCoreBenchmark"),
        .executableTarget(
            name: "MicroHTTPBenchmark", dependencies: ["MicroHTTP"], path: "Benchmarks/MicroHTTPBenchmark"),
        // Swift 5 mode: these tests drive one reactor from several threads at once, the thread
        // safety under test, which a reactor (not Sendable, by design) cannot express in Swift 6 mode.
        .testTarget(
            name: "ReactorCoreTests", dependencies: ["ReactorCore", "TestSupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        .testTarget(
            name: "ConcurrencyPrimitivesTests", dependencies: ["ConcurrencyPrimitives"]),
        .testTarget(name: "ReactorStoreTests", dependencies: ["ReactorStore", "TestSupport"]),
        // The raw-socket test clients and `Locked`, one piece of code shared by the test targets.
        .target(name: "TestSupport", dependencies: [], path: "Tests/Support"),
        .testTarget(name: "MicroHTTPTests", dependencies: ["MicroHTTP", "TestSupport"]),
        // A test server with the bundled reactors, shared by the service and client tests.
        .target(
            name: "ServerSupport",
            dependencies: [
                "ReactorService", "Examples",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/ServerSupport"),
        // Swift 5 mode, as ReactorClientTests: their load and fault tests share the test case, its
        // fixture and its raw clients (classes, not Sendable) with the threads they start.
        .testTarget(
            name: "ReactorServiceTests",
            dependencies: [
                "ReactorService", "Examples", "TestSupport", "ServerSupport",
                "JWSSignatures", "ReactorServiceCLI",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        // Swift 5 mode: one retry test trips Swift 6.3's region-based isolation checker ("a pattern
        // [it] does not understand"), a compiler bug, besides the captures above.
        .testTarget(
            name: "ReactorClientTests", dependencies: ["ReactorClient", "ReactorService", "ServerSupport"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
    ],
    swiftLanguageModes: [.v6]
)

// The container image's build copies only Package.swift and Sources/: without Tests/, the test
// and benchmark targets (and the support targets under Tests/) are left out, so building
// `reactord` needs nothing else.
if !FileManager.default.fileExists(atPath: Context.packageDirectory + "/Tests") {
    package.targets.removeAll { target in
        target.type == .test || ["Tests/", "Benchmarks/"].contains { target.path?.hasPrefix($0) == true }
    }
}
