import Foundation
import MQTTLoad
import NIOPosix
@testable import SIMPBench
import Testing

/// The group fan-out against a spawned redis-server and simp-server: counts, never timings.
@Suite(.serialized) struct GroupFanOutTests {
    static let redisInstalled = (try? Spawn.executable("redis-server")) != nil

    /// `pattern` through a spawned redis-server and simp-server (with `serverArguments` too),
    /// its clients placed by `place`; the stack stops either way.
    static func run(_ pattern: FanOutPattern, serverArguments: [String] = [],
                    place: (inout Placement) -> Void = { _ in }) async throws -> FanOutResult {
        let stack = try await SpawnedStack.start(SpawnOptions(serverBinary: try productPath("simp-server"), serverArguments: [
            "--scrypt-rounds", "1024", "--min-password-length", "1", "--log-level", "warning",
        ] + serverArguments))
        var placement = Placement(nodes: stack.serverAddresses)
        place(&placement)
        let loops = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let result: FanOutResult
        do {
            (result, _) = try await GroupLoad.run(pattern, placement: placement, group: loops, processes: [])
        } catch {
            await stack.stop()
            try await loops.shutdownGracefully()
            throw error
        }
        await stack.stop()
        try await loops.shutdownGracefully()
        return result
    }

    @Test(.enabled(if: redisInstalled, "redis-server is not installed (apt-get install redis-server)"))
    func aShortGroupRunDeliversEveryAcceptedMessageToEveryMember() async throws {
        let pattern = FanOutPattern(members: 5, window: 4, payloadBytes: 64, duration: 1, warmup: 0.2, drain: 30)
        // Plaintext clients: the server's default would refuse them.
        let result = try await Self.run(pattern, serverArguments: ["--e2e", "optional"])
        #expect(result.failed == 0, "\(result.failures)")
        #expect(result.sent > 0 && result.accepted == result.sent)
        #expect(result.deliveries > 0)
        #expect(result.deliveries <= result.accepted * pattern.members)
        // Accepted means in every member's inbox: each member gets each message, once.
        #expect(result.deliveries == result.accepted * pattern.members)
        #expect(result.lost == 0 && result.duplicates == 0)
        #expect(result.deliveriesInWindow <= result.deliveries && result.acceptedInWindow <= result.accepted)
        #expect(result.sendToReceive.totalCount > 0 && result.sendToAccepted.totalCount > 0)
        // One latency sample per member and message sent in the window, one "all delivered" per message.
        #expect(result.sendToReceive.totalCount == result.sendToAccepted.totalCount * UInt64(pattern.members))
        #expect(result.sendToAllDelivered.totalCount == result.sendToAccepted.totalCount)
    }

    /// `--group-members N --e2e`: every client encrypts, with a data directory; the sender sends
    /// with `try await send` (`GroupLoad.sendAsync`); every member reads every message (the
    /// counts come from the texts the members decrypted). 40 members: more devices than one
    /// commit adds (each adds a KeyPackage to the commit), so the group is made in several
    /// commits before the first message. 100 members: the group's Welcome (about 16,500 bytes)
    /// was over its limit while it was repeated per device; sent once, it fits.
    @Test(.enabled(if: redisInstalled, "redis-server is not installed (apt-get install redis-server)"), arguments: [40, 100])
    func anEncryptedGroupRunDeliversEveryMessageDecryptedToEveryMember(members: Int) async throws {
        let pattern = FanOutPattern(members: members, window: 4, payloadBytes: 64, duration: 1, warmup: 0.2, drain: 60)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-bench-test-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await Self.run(pattern, serverArguments: [
            "--e2e", "required",
            // The members register from this one address, and claim each other's KeyPackages.
            "--max-registrations-per-ip", "1000", "--max-conns-per-ip", "1000", "--max-hashing-per-ip", "1024",
            "--max-hashing-queue", "1024",
        ]) { placement in
            placement.dataDirectory = directory
            placement.endToEnd = true
        }
        #expect(result.failed == 0, "\(result.failures)")
        #expect(result.sent > 0 && result.accepted == result.sent)
        #expect(result.deliveries == result.accepted * pattern.members)
        #expect(result.lost == 0 && result.duplicates == 0)
        #expect(result.sendToAllDelivered.totalCount == result.sendToAccepted.totalCount)
    }

    @Test(.enabled(if: MosquittoProcess.executable() != nil, "mosquitto is not installed (apt-get install mosquitto)"))
    func aShortFanOutThroughMosquittoDeliversEveryMessageToEverySubscriber() async throws {
        let pattern = FanOutPattern(members: 5, window: 4, payloadBytes: 64, duration: 1, warmup: 0.2, drain: 30)
        let broker = try await MosquittoProcess.start()
        let result: FanOutResult
        do {
            result = try await MQTTFanOut.run(pattern, host: "127.0.0.1", port: broker.port, group: MultiThreadedEventLoopGroup.singleton)
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        #expect(result.failed == 0, "\(result.failures)")
        #expect(result.sent > 0 && result.accepted == result.sent)
        #expect(result.deliveries > 0)
        #expect(result.deliveries == result.accepted * pattern.members)
        #expect(result.lost == 0 && result.duplicates == 0)
        #expect(result.sendToReceive.totalCount == result.sendToAccepted.totalCount * UInt64(pattern.members))
        #expect(result.sendToAllDelivered.totalCount == 0)
    }
}

@Suite struct GroupReportTests {
    @Test func twoSystemsGetARatioOfDeliveriesAndNoAllDeliveredForTheBroker() {
        var simp = FanOutResult()
        var broker = FanOutResult()
        simp.deliveriesInWindow = 3000
        broker.deliveriesInWindow = 1000
        simp.acceptedInWindow = 30
        broker.acceptedInWindow = 10
        simp.measuredSeconds = 1
        broker.measuredSeconds = 1
        for _ in 0..<10 { _ = simp.sendToAllDelivered.record(500) }
        let report = GroupBenchReport(pattern: FanOutPattern(members: 100, window: 32), systems: [
            GroupSystemReport(system: "SIMP", simp, usage: [:], allDelivered: true),
            GroupSystemReport(system: "Mosquitto", broker, usage: [:], allDelivered: false),
        ])
        let table = report.table()
        #expect(table.hasPrefix("group fan-out: 1 sender to 100 members, 32 in flight"))
        #expect(row("deliveries/s", of: table)?.hasSuffix("3.00x") == true)
        #expect(row("accepted msg/s", of: table)?.hasSuffix("3.00x") == true)
        #expect(row("send->all delivered p50/p90/p99 ms", of: table)?.contains(" -") == true)
        #expect(report.json().contains("\"deliveriesPerSecond\":3000"))
        #expect(report.json().contains("\"mode\":\"group fan-out\""))
    }

    private func row(_ name: String, of table: String) -> Substring? {
        table.split(separator: "\n").first { $0.hasPrefix(name) }
    }
}

/// A product built next to the test bundle (swift build puts them together), else in the
/// package's default build directory.
func productPath(_ name: String) throws -> String {
    var candidates = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path]
    var dir = URL(fileURLWithPath: #filePath)
    while dir.path != "/" {
        dir.deleteLastPathComponent()
        candidates.append(dir.appendingPathComponent(".build/debug/\(name)").path)
    }
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw BenchError("\(name) not built; run swift build --build-tests first")
    }
    return found
}
