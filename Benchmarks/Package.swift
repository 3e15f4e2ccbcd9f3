// swift-tools-version:6.1
// Everything that measures SIMP, kept out of the product package so a server, a client app and
// the root package's CI do not build it or install its brokers' libraries:
// - simp-bench: the load generators (SIMPBench) and the same load through Mosquitto (MQTTLoad),
//   RabbitMQ and NATS JetStream (DurableLoad, librabbitmq). scripts/bench.sh installs what it needs
//   and builds it; scripts/test.sh runs SIMPBenchTests and MQTTLoadTests.
// - package benchmarks (ordo-one/benchmark): cd Benchmarks && swift package benchmark
//
// The scripts build this package in the root's scratch path (scripts/build-bench.sh,
// scripts/test.sh), so the modules both packages share are built once and simp-bench lands
// next to simp-server, where --spawn looks for it.
import class Foundation.ProcessInfo
import PackageDescription

// SIMP_BENCH_LOADS_ONLY=1 (scripts/test.sh, scripts/build-bench.sh): simp-bench, its load
// generators and their tests only; without ordo-one/benchmark, whose library, plugin and
// plugin tools CI would otherwise build for nothing.
let loadsOnly = ProcessInfo.processInfo.environment["SIMP_BENCH_LOADS_ONLY"] == "1"

let package = Package(
    name: "simp-benchmarks",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "simp-bench", targets: ["simp-bench"]),
    ],
    dependencies: [
        .package(name: "simp", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.5.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    ] + (loadsOnly ? [] : [
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.0", traits: ["MallocInterposer"]),
    ]),
    targets: [
        // The same load pattern through a local Mosquitto (MQTT 3.1.1, QoS 1), for simp-bench's comparison.
        .target(
            name: "MQTTLoad",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        // librabbitmq (Debian `librabbitmq-dev`): the AMQP 0-9-1 client DurableLoad drives RabbitMQ with.
        .systemLibrary(
            name: "CRabbitMQ",
            pkgConfig: "librabbitmq",
            providers: [.apt(["librabbitmq-dev"])]
        ),
        // The same load pattern through durable brokers: RabbitMQ (persistent messages, publisher
        // confirms, manual acks) and NATS JetStream (file storage, PubAcks, explicit acks).
        .target(
            name: "DurableLoad",
            dependencies: [
                "MQTTLoad",
                "CRabbitMQ",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        // Load generator: N sender/receiver pairs through SIMPClient, latency histograms, process CPU and RSS.
        .target(
            name: "SIMPBench",
            dependencies: [
                .product(name: "SIMPClient", package: "simp"),
                .product(name: "SIMPCore", package: "simp"),
                // RawPeer: the receipt flood's hand-driven session.
                .product(name: "SIMPTestSupport", package: "simp"),
                "MQTTLoad",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ]
        ),
        .executableTarget(
            name: "simp-bench",
            dependencies: [
                "SIMPBench",
                "DurableLoad",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "MQTTLoadTests",
            dependencies: ["MQTTLoad", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")]
        ),
        .testTarget(
            name: "SIMPBenchTests",
            dependencies: ["SIMPBench", "MQTTLoad", "DurableLoad",
                           .product(name: "SIMPChaos", package: "simp"),
                           .product(name: "SIMPTestSupport", package: "simp"),
                           .product(name: "Histogram", package: "hdrhistogram-swift")]
        ),
    ] + (loadsOnly ? [] : [
        .executableTarget(
            name: "SIMPCoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SIMPCore", package: "simp"),
                .product(name: "SIMPRedis", package: "simp"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/SIMPCoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // MLS (SIMPMLS): message protection now; commits once the group state exists.
        .executableTarget(
            name: "SIMPMLSBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "SIMPMLS", package: "simp"),
            ],
            path: "Benchmarks/SIMPMLSBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]),
    swiftLanguageModes: [.v6]
)
