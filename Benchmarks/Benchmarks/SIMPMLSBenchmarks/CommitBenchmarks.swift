import Benchmark
import SIMPMLS

/// The group sizes of the commit benchmarks.
let commitMemberCounts = [2, 100, 1000, 10_000]

/// A ``CommitFixture`` and the commits its processing benchmarks replay, built the first time a
/// benchmark of its size runs and shared by that size's benchmarks.
final class CommitSetup {
    let members: Int
    init(members: Int) { self.members = members }

    lazy var fixture = try! CommitFixture(members: members)
    /// The committer's commit removing the last member.
    lazy var removal: MLSGroup.CommitOutput = try! fixture.commit(removing: [fixture.lastLeaf])
    /// A new member's key package bundle and the committer's commit adding it.
    lazy var addition: (member: MLSKeyPackageBundle, output: MLSGroup.CommitOutput) = {
        let member = try! fixture.newMember()
        return (member, try! fixture.commit(adding: [member.keyPackage]))
    }()
}

let commitBytes = BenchmarkMetric.custom("commit bytes", useScalingFactor: false)
let welcomeBytes = BenchmarkMetric.custom("welcome bytes", useScalingFactor: false)

/// Commit benchmarks at each size, suite 1, one commit per sample. "create" is the committer's
/// `commit(adding:removing:randomness:)` (proposals applied, path made and encrypted, framed,
/// signed, the new epoch's secrets, and for an Add the Welcome); "process" is another member's
/// `process` of it (membership tag and signature, proposals applied, path merged and decrypted,
/// the new epoch's secrets, confirmation tag); "join" is the new member's side of an Add. Sizes
/// are of the encoded MLSMessage.
func commitBenchmarks() {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal, commitBytes, welcomeBytes],
        warmupIterations: 2, scalingFactor: .one, maxDuration: .seconds(4), maxIterations: 500)

    for members in commitMemberCounts {
        // A Remove needs a member other than the committer and the processor: at 2 members the
        // group has 3 and one is removed.
        let removeSetup = CommitSetup(members: max(members, 3))
        let setup = members >= 3 ? removeSetup : CommitSetup(members: members)
        let removeLabel = "\(max(members, 3)) members"

        Benchmark("Commit remove, create (\(removeLabel))", configuration: configuration) { benchmark in
            var fixture = removeSetup.fixture
            let removed = fixture.lastLeaf
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                let output = try fixture.commit(removing: [removed])
                benchmark.stopMeasurement()
                benchmark.measurement(commitBytes, try output.message.mlsEncoded().count)
                blackHole(output)
            }
            removeSetup.fixture = fixture
        }

        Benchmark("Commit remove, process (\(removeLabel))", configuration: configuration) { benchmark in
            let fixture = removeSetup.fixture
            let commit = removeSetup.removal.message
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                blackHole(try fixture.process(commit))
                benchmark.stopMeasurement()
            }
        }

        Benchmark("Commit add, create with the Welcome (\(members) members)", configuration: configuration) { benchmark in
            var fixture = setup.fixture
            let member = setup.addition.member
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                let output = try fixture.commit(adding: [member.keyPackage])
                benchmark.stopMeasurement()
                benchmark.measurement(commitBytes, try output.message.mlsEncoded().count)
                if let welcome = output.welcome { benchmark.measurement(welcomeBytes, try MLSMessage.welcome(welcome).mlsEncoded().count) }
                blackHole(output)
            }
            setup.fixture = fixture
        }

        // A commit without proposals (the committer's own keys refreshed): the smallest commit,
        // one ciphertext per node of the committer's filtered direct path.
        Benchmark("Commit self-update, create (\(members) members)", configuration: configuration) { benchmark in
            var fixture = setup.fixture
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                let output = try fixture.commit()
                benchmark.stopMeasurement()
                benchmark.measurement(commitBytes, try output.message.mlsEncoded().count)
                blackHole(output)
            }
            setup.fixture = fixture
        }

        Benchmark("Commit add, process (\(members) members)", configuration: configuration) { benchmark in
            let fixture = setup.fixture
            let commit = setup.addition.output.message
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                blackHole(try fixture.process(commit))
                benchmark.stopMeasurement()
            }
        }

        // The new member's side: decrypt the Welcome, check the GroupInfo and the whole tree
        // (tree hash, parent hashes, every leaf's signature), take its keys.
        Benchmark("Commit add, the new member joins from the Welcome (\(members) members)", configuration: configuration) { benchmark in
            let (member, output) = setup.addition
            let welcome = output.welcome!
            for _ in benchmark.scaledIterations {
                benchmark.startMeasurement()
                blackHole(try MLSGroup(joining: welcome, with: member))
                benchmark.stopMeasurement()
            }
        }
    }
}
