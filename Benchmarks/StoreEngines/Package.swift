// swift-tools-version:6.0
import Foundation
import PackageDescription

// A path dependency is known by its folder's name: the clone's (`main` here, `reactord` elsewhere).
let repository = URL(fileURLWithPath: Context.packageDirectory)
    .deletingLastPathComponent().deletingLastPathComponent().lastPathComponent.lowercased()

// Not part of the root package (CI never builds it): the evidence for issue 11's choice
// between GRDB and the thin libsqlite3 wrapper that ReactorStore uses. See README.md.
let package = Package(
    name: "StoreEngines",
    dependencies: [
        .package(path: "../.."),
        .package(url: "https://github.com/groue/GRDB.swift.git", exact: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "StoreEnginesBenchmark",
            dependencies: [
                .product(name: "ReactorStore", package: repository),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        )
    ],
    swiftLanguageModes: [.v5]
)
