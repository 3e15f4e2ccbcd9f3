// swift-tools-version:6.1
// Package benchmarks (ordo-one/benchmark), kept out of the main package so its build and CI
// do not pay for them. Run: cd Benchmarks && swift package benchmark
import PackageDescription

let package = Package(
    name: "simp-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "simp", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.0", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
    ],
    targets: [
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
    ],
    swiftLanguageModes: [.v6]
)
