// swift-tools-version:6.2
// A user's server package, as the README tells one to write it: Swift 6 language mode (the
// default of tools 6.x), reactord by path. scripts/check-own-server builds it with every warning
// an error and drives it over HTTP.
import PackageDescription

let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

let package = Package(
    name: "OwnServer",
    dependencies: [.package(name: "reactord", path: "../../..")],
    targets: [
        // The README's "Serving your own reactor": ReactorServer.main and a todo reactor.
        .executableTarget(
            name: "OwnServer",
            dependencies: [
                .product(name: "ReactorCore", package: "reactord"),
                .product(name: "ReactorService", package: "reactord"),
                .product(name: "ReactorServiceCLI", package: "reactord"),
            ],
            swiftSettings: strict
        ),
        // The README's example before ReactorServiceCLI existed (ServiceConfiguration,
        // register, run), kept as written: it must go on compiling and serving. It trapped on
        // the first POST /sessions until register's factory became @Sendable.
        .executableTarget(
            name: "LegacyServer",
            dependencies: [
                .product(name: "ReactorCore", package: "reactord"),
                .product(name: "ReactorService", package: "reactord"),
            ],
            swiftSettings: strict
        ),
    ]
)
