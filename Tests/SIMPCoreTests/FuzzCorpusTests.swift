import Foundation
import SIMPFuzzTargets
import SIMPTestSupport
import Testing

/// Every seed and every crasher the fuzzers ever found (Tests/FuzzCorpus/TARGET) goes through
/// its target again: a crash here is a regression.
@Suite struct FuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("FuzzCorpus")

    @Test(arguments: FuzzTarget.allCases)
    func replaysTheCorpus(_ target: FuzzTarget) throws {
        let dir = Self.corpus.appendingPathComponent(target.rawValue)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(!files.isEmpty, "no inputs in \(dir.path)")
        for file in files {
            let data = try Data(contentsOf: dir.appendingPathComponent(file))
            target.run(Array(data))
        }
    }

    @Test func randomInputsDoNotCrashAnyTarget() {
        var rng = SplitMix64(seed: 0x5eed)
        for target in FuzzTarget.allCases {
            for _ in 0..<2000 {
                let count = Int.random(in: 0..<300, using: &rng)
                target.run((0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) })
            }
        }
    }
}
