// swift-tools-version:6.2
// A user's server package, as docs/serving-your-own.md tells one to write it: Swift 6 language mode (the
// default of tools 6.x), reactord by path. scripts/check-own-server builds it with every warning
// an error and drives it over HTTP.
import Foundation
import PackageDescription

let strict: [SwiftSetting] = [.treatAllWarnings(as: .error)]

// The Swift examples of README.md and docs/, one target per folder that scripts/readme_snippets.py writes
// into ReadmeSnippets/ (git-ignored): they build here, in the same build as the server,
// rather than in a second package that would build reactord's whole graph again.
let everyProduct: [Target.Dependency] = ["ReactorCore", "ReactorService", "ReactorServiceCLI", "ReactorClient"]
    .map { .product(name: $0, package: "reactord") } + [.product(name: "ArgumentParser", package: "swift-argument-parser")]
let snippetFolders = ((try? FileManager.default.contentsOfDirectory(
    atPath: Context.packageDirectory + "/ReadmeSnippets")) ?? []).filter { !$0.hasPrefix(".") }.sorted()
let snippetTargets: [Target] = snippetFolders.map { folder in
    folder.hasSuffix("Tests")
        ? .testTarget(name: folder, dependencies: everyProduct, path: "ReadmeSnippets/\(folder)", swiftSettings: strict)
        : .executableTarget(name: folder, dependencies: everyProduct, path: "ReadmeSnippets/\(folder)", swiftSettings: strict)
}

let package = Package(
    name: "OwnServer",
    dependencies: [
        .package(name: "reactord", path: "../../.."),
        // Already in reactord's graph (no extra build): for the own-command example of docs/serving-your-own.md.
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // docs/serving-your-own.md: ReactorServer.main and a todo reactor.
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
    ] + snippetTargets
)
