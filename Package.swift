// swift-tools-version:6.1
import PackageDescription

// The datagram seal (issue 47): OpenSSL's libcrypto through CAEAD on Linux, its fast path;
// swift-crypto's ChaChaPoly elsewhere, and on Linux too with SIMP_PORTABLE_CRYPTO=1 in the
// environment (CAEAD is then left out of the package), so the portable path is tested here.
// Both seal the same bytes (docs/vectors/datagrams.json).
let portableCrypto = Context.environment["SIMP_PORTABLE_CRYPTO"] == "1"
let opensslAEAD: [Target.Dependency] = portableCrypto ? [] : [.target(name: "CAEAD", condition: .when(platforms: [.linux]))]
let opensslAEADSettings: [SwiftSetting] = portableCrypto ? [] : [.define("SIMP_OPENSSL_AEAD", .when(platforms: [.linux]))]

let package = Package(
    name: "simp",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .library(name: "SIMPCore", targets: ["SIMPCore"]),
        .library(name: "SIMPRedis", targets: ["SIMPRedis"]),
        .library(name: "SIMPServer", targets: ["SIMPServer"]),
        .library(name: "SIMPClient", targets: ["SIMPClient"]),
        // For the Benchmarks package (load generators, simp-bench): the chaos run's seeded generator
        // and the tests' hand-driven peer and spawned Redis. Not for applications.
        .library(name: "SIMPChaos", targets: ["SIMPChaos"]),
        .library(name: "SIMPTestSupport", targets: ["SIMPTestSupport"]),
        .executable(name: "simp-server", targets: ["simp-server"]),
        .executable(name: "simp", targets: ["simp"]),
        .executable(name: "simp-fuzz", targets: ["simp-fuzz"]),
        .executable(name: "simp-admin", targets: ["simp-admin"]),
        .executable(name: "simp-chaos", targets: ["simp-chaos"]),
        .executable(name: "simp-conformance", targets: ["simp-conformance"]),
        .library(name: "SIMPMLS", targets: ["SIMPMLS"]),
        .executable(name: "simp-mls-vectors", targets: ["simp-mls-vectors"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        // No traits (its defaults, BinaryDelimitedStreams and FieldMaskUtilities, are APIs SIMP does not
        // use): with two, SwiftPM 6.3 writes their -D flags in a random order each time it plans, and
        // every new plan (an edit of a manifest, or the Benchmarks package's build in .build) had an
        // even chance of compiling SwiftProtobuf, and relinking everything, again.
        .package(url: "https://github.com/apple/swift-protobuf.git", from: "1.28.0", traits: []),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        // 1.16.2: LogHandler.log(event:), which JSONLogHandler implements.
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.0"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.29.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.0.0"),
        // The config file layer (flags > environment > file). Default traits only: JSON.
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0"),
    ],
    targets: [
        // ChaCha20-Poly1305 from OpenSSL's libcrypto (Debian `libssl-dev`), for the datagram seal.
        .target(name: "CAEAD", linkerSettings: [.linkedLibrary("crypto", .when(platforms: [.linux]))]),
        // Wire schema, framing, datagram codec, retransmit and de-duplication state machines. No I/O.
        .target(
            name: "SIMPCore",
            dependencies: opensslAEAD + [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
            ],
            swiftSettings: opensslAEADSettings
        ),
        .systemLibrary(
            // No pkgConfig: hiredis.pc only adds -I/usr/include/hiredis (the shim includes
            // <hiredis/hiredis.h>) and -D_FILE_OFFSET_BITS=64, a flag SwiftPM warns it drops.
            // The module map links the library; scripts/install-deps.sh installs libhiredis-dev.
            name: "CHiredis",
            providers: [.apt(["libhiredis-dev"])]
        ),
        // hiredis' command formatter and reply reader on NIO channels: one pipelined connection per event loop.
        .target(
            name: "SIMPRedis",
            dependencies: [
                "CHiredis",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "SIMPServer",
            dependencies: [
                "SIMPCore",
                "SIMPMLS",
                "SIMPRedis",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .target(
            name: "SIMPClient",
            dependencies: [
                "SIMPCore",
                "SIMPMLS",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .executableTarget(
            name: "simp-server",
            dependencies: [
                "SIMPServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Configuration", package: "swift-configuration"),
            ]
        ),
        .executableTarget(
            name: "simp-admin",
            dependencies: [
                "SIMPServer",
                "SIMPRedis",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // libedit (Debian libedit-dev): the REPL's line editing, history and completion on a terminal.
        .systemLibrary(
            name: "CEditLine",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),
        // The terminal client's pure parts (commands, screen, completion, styling): not in the
        // library an application embeds.
        .target(
            name: "SIMPTerminal",
            dependencies: ["SIMPClient", "SIMPCore"]
        ),
        .executableTarget(
            name: "simp",
            dependencies: [
                "SIMPClient",
                "SIMPCore",
                "SIMPTerminal",
                "CEditLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // libFuzzer targets over the network-facing decoders (scripts/fuzz.sh).
        .target(
            name: "SIMPFuzzTargets",
            dependencies: [
                "SIMPCore",
                "SIMPMLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .target(name: "CFuzzDriver"),
        .executableTarget(name: "simp-fuzz", dependencies: ["SIMPFuzzTargets", "CFuzzDriver"]),
        // docs/PROTOCOL.md's numbered checks against any SIMP server, on the wire (issue 28).
        .target(name: "SIMPConformance", dependencies: ["SIMPCore", "SIMPTestSupport"]),
        .executableTarget(
            name: "simp-conformance",
            dependencies: ["SIMPConformance", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        // The chaos run's pure parts: the seeded fault schedule and the checker over client logs.
        .target(name: "SIMPChaos"),
        // Seeded faults against real simp-server, redis-server and simp processes (issue 24).
        .executableTarget(
            name: "simp-chaos",
            dependencies: [
                "SIMPChaos",
                "SIMPClient",
                "SIMPTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
                // Reads the received messages a killed client kept in its data directory.
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        // Examples/: small programs that embed SIMPClient as an application would (issue 47), built
        // with the package so the tests run them against a real server (ExampleProgramTests).
        .executableTarget(name: "simp-example-bot", dependencies: ["SIMPClient"], path: "Examples/EchoBot"),
        .executableTarget(name: "simp-example-chat", dependencies: ["SIMPClient"], path: "Examples/Chat"),
        .testTarget(name: "SIMPChaosTests", dependencies: ["SIMPChaos"]),
        // MLS (RFC 9420), pure: no I/O, no clock, randomness passed in; only swift-crypto (issue 42).
        .target(name: "SIMPMLS", dependencies: [.product(name: "Crypto", package: "swift-crypto")]),
        // Checks SIMPMLS against mlswg/mls-implementations' test vector files.
        .executableTarget(
            name: "simp-mls-vectors",
            dependencies: ["SIMPMLS", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .testTarget(name: "SIMPMLSTests", dependencies: ["SIMPMLS"], resources: [.copy("Vectors")]),
        .testTarget(name: "SIMPCoreTests", dependencies: [
            // SIMPChaos: its seeded generator, so randomized tests replay.
            "SIMPCore", "SIMPFuzzTargets", "SIMPTestSupport", "SIMPChaos", .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
        ]),
        .testTarget(
            name: "SIMPClientTests",
            dependencies: ["SIMPClient", "SIMPCore", .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(name: "SIMPTerminalTests", dependencies: ["SIMPTerminal", "SIMPClient"]),
        .testTarget(name: "SIMPRedisTests", dependencies: ["SIMPRedis", "SIMPTestSupport", .product(name: "NIOEmbedded", package: "swift-nio")]),
        .testTarget(
            name: "SIMPServerTests",
            dependencies: ["SIMPServer", "SIMPClient", "SIMPCore", "SIMPRedis", "SIMPTestSupport", "SIMPConformance",
                           .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "Logging", package: "swift-log"),
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio")]
        ),
        .target(
            name: "SIMPTestSupport",
            dependencies: [
                "SIMPChaos",
                "SIMPCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/SIMPTestSupport"
        ),
    ],
    swiftLanguageModes: [.v6]
)

if portableCrypto {
    package.targets.removeAll { $0.name == "CAEAD" }
}

// SIMP_ONLY_TARGETS=SIMPCoreTests,SIMPClientTests,simp: only these targets and the targets they
// need, so that a second build (scripts/test.sh's portable run, in a scratch path of its own)
// compiles no more than it tests. Unset, the package is whole. (The package dependencies stay,
// so that Package.resolved is not rewritten; SwiftPM warns of the ones no target then uses.)
if let only = Context.environment["SIMP_ONLY_TARGETS"] {
    var needed = Set<String>()
    var pending = only.split(separator: ",").map(String.init)
    while let name = pending.popLast() {
        guard needed.insert(name).inserted, let target = package.targets.first(where: { $0.name == name }) else { continue }
        for dependency in target.dependencies {
            switch dependency {
            case .targetItem(let name, _), .byNameItem(let name, _): pending.append(name)
            case .productItem: break
            @unknown default: break
            }
        }
    }
    package.targets.removeAll { !needed.contains($0.name) }
    package.products.removeAll { product in
        let targets = (product as? Product.Library)?.targets ?? (product as? Product.Executable)?.targets ?? []
        return !targets.allSatisfy(needed.contains)
    }
}
