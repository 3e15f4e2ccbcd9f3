import Foundation
import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A client whose data directory fills up: it confirms nothing it did not write, says so,
/// and takes the messages when they come again once there is room; a send it cannot write
/// to its outbox fails. The directory is a small tmpfs filled to the last byte after the
/// client connected.
@Suite(.serialized, .enabled(if: SmallDisk.canMount, "needs root and tmpfs mounts"))
struct ClientStoreFullDiskTests {
    /// bob's 10 messages come while his disk is full: none is shown or confirmed (alice gets
    /// no `delivered`, Redis keeps them unconfirmed); restarted on the same directory with
    /// room, he gets them again, shows each once and confirms them.
    @Test func receivedMessagesAreConfirmedOnlyOnceOnDiskAndComeAgainAfterARestart() async throws {
        let world = try await FullDiskWorld.start()
        defer { world.disk.unmount() }
        try world.disk.fill()
        let ids = try await world.aliceSends(10)
        #expect(await world.bobLog.wait { FullDiskWorld.highestUnsaved($0) == 10 }, "errors: \(world.bobLog.errors)")
        #expect(world.bobLog.messages.isEmpty, "nothing is shown before it is on disk")
        #expect(world.aliceLog.delivered.isEmpty)
        #expect(try world.redisInteger(["GET", "simp:{bob}:acked"]) == nil)
        #expect(try world.redisInteger(["ZCARD", "simp:{bob}:inbox"]) == 10)

        await world.bob.close()
        try world.disk.free()
        let again = SIMPClient(configuration: world.bobConfiguration)
        let againLog = EventLog(again)
        try await again.connect(user: "bob", password: "pw-bob")
        #expect(await againLog.wait { $0.messages.count >= 10 })
        #expect(againLog.messages.map(\.id) == ids, "each once, in order")
        #expect(await world.aliceLog.wait { Set($0.delivered) == Set(ids) })
        #expect(await world.ackedMark(becomes: 10))
        #expect(againLog.errors.isEmpty, "\(againLog.errors)")
        await again.close()
        await world.cleanUp()
    }

    /// Without a restart: the server pushes what was not confirmed again, and once the disk
    /// has room the running client writes, shows and confirms it.
    @Test func theRunningClientTakesTheMessagesWhenTheDiskHasRoomAgain() async throws {
        let world = try await FullDiskWorld.start()
        defer { world.disk.unmount() }
        try world.disk.fill()
        let ids = try await world.aliceSends(5)
        #expect(await world.bobLog.wait { FullDiskWorld.highestUnsaved($0) == 5 }, "errors: \(world.bobLog.errors)")
        #expect(world.bobLog.messages.isEmpty)
        #expect(world.aliceLog.delivered.isEmpty)
        let reported = world.bobLog.errors.count

        try world.disk.free()
        #expect(await world.bobLog.wait { $0.messages.count >= 5 })
        #expect(world.bobLog.messages.map(\.id) == ids, "each once, in order")
        #expect(await world.aliceLog.wait { Set($0.delivered) == Set(ids) })
        #expect(await world.ackedMark(becomes: 5))
        #expect(world.bobLog.errors.count == reported, "the resends of unsaved messages are not reported again")
        await world.cleanUp()
    }

    /// Encrypted: what bob's device opened while the disk was full (the group's state moved on
    /// in memory, then its write failed with the messages') is forgotten, and the messages the
    /// server pushes again open from the state on disk: each shown once, decrypted, none
    /// undecryptable. Fails when the opening is not forgotten (the keys are gone from memory).
    @Test func sealedMessagesThatCameWhileTheDiskWasFullOpenOnceItHasRoom() async throws {
        let cluster = try await TestCluster.start()
        let disk = try SmallDisk()
        defer { disk.unmount() }
        let aliceDirectory = LocalHistoryTests.directory()
        defer { try? FileManager.default.removeItem(atPath: aliceDirectory) }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await EncryptedConversationTests.connected(cluster, "alice", aliceDirectory)
        let (bob, bobLog) = try await EncryptedConversationTests.connected(cluster, "bob", disk.path)
        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await bob.setUpIdentity() == .created)
        let first = try await alice.send(to: "bob", text: "before the disk filled")
        #expect(await bobLog.wait { $0.messages.map(\.id) == [first] }, "errors: \(bobLog.errors)")
        // Not 1: the KEYS_CHANGED notice of bob's own identity came first.
        let firstSeq = Int(try #require(bobLog.messages.first?.seq))

        try disk.fill()
        var ids: [String] = []
        for n in 1...5 { ids.append(try await alice.send(to: "bob", text: "sealed \(n)")) }
        #expect(await aliceLog.wait { Set($0.accepted).isSuperset(of: ids) })
        #expect(await bobLog.wait { FullDiskWorld.highestUnsaved($0) == firstSeq + 5 }, "errors: \(bobLog.errors)")
        #expect(bobLog.messages.map(\.id) == [first], "nothing is shown before it is on disk")

        try disk.free()
        #expect(await bobLog.wait { $0.messages.count >= 6 }, "errors: \(bobLog.errors); events: \(bobLog.all.suffix(8))")
        #expect(bobLog.messages.map(\.id) == [first] + ids, "each once, in order")
        #expect(bobLog.messages.map(\.text) == ["before the disk filled"] + (1...5).map { "sealed \($0)" })
        #expect(bobLog.messages.allSatisfy { $0.encrypted })
        #expect(!bobLog.all.contains { if case .undecryptable = $0 { true } else { false } }, "\(bobLog.all)")
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: ids) })
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// On the stream path (bob's UDP goes nowhere) the server runs no retransmit timer: bob
    /// asks for what he could not keep again (a gap report each second), and takes it once
    /// the disk has room. Before, it waited for his next connection.
    @Test func onTheStreamPathTheRunningClientAsksForWhatItCouldNotKeep() async throws {
        let world = try await FullDiskWorld.start(bobsUDPPort: try unusedUDPPort())
        defer { world.disk.unmount() }
        #expect(world.bobLog.all.contains(.connected(user: "bob", path: .stream)), "\(world.bobLog.all)")
        try world.disk.fill()
        let ids = try await world.aliceSends(3)
        #expect(await world.bobLog.wait { FullDiskWorld.highestUnsaved($0) == 3 }, "errors: \(world.bobLog.errors)")
        #expect(world.bobLog.messages.isEmpty)

        try world.disk.free()
        #expect(await world.bobLog.wait { $0.messages.count >= 3 }, "\(world.bobLog.all)")
        #expect(world.bobLog.messages.map(\.id) == ids, "each once, in order")
        #expect(await world.aliceLog.wait { Set($0.delivered) == Set(ids) })
        #expect(await world.ackedMark(becomes: 3))
        await world.cleanUp()
    }

    /// A port no one listens on: bound, then closed.
    private func unusedUDPPort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw TestSupportError("cannot bind a UDP socket: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// A send whose outbox write fails throws and is not sent; with room again, sending works
    /// and a restart resends nothing.
    @Test func aSendThatCannotBeWrittenToTheOutboxFails() async throws {
        let world = try await FullDiskWorld.start()
        defer { world.disk.unmount() }
        try world.disk.fill()
        await #expect {
            _ = try await world.bob.send(to: "alice", text: "not on disk")
        } throws: { error in
            (error as? ClientError)?.message.contains("message not sent: cannot write it to the outbox") == true
        }
        #expect(await world.bob.outstandingCount() == 0)
        #expect(world.bobLog.accepted.isEmpty)
        #expect(try world.redisInteger(["GET", "simp:{alice}:seq"]) == nil, "nothing was stored for alice")

        try world.disk.free()
        let id = try await world.bob.send(to: "alice", text: "on disk")
        #expect(await world.bobLog.wait { $0.delivered == [id] })
        await world.bob.close()
        let again = SIMPClient(configuration: world.bobConfiguration)
        let againLog = EventLog(again)
        try await again.connect(user: "bob", password: "pw-bob")
        #expect(await again.outstandingCount() == 0, "the outbox holds nothing to resend")
        await again.close()
        #expect(world.aliceLog.messages.map(\.text) == ["on disk"])
        #expect(try world.redisInteger(["GET", "simp:{alice}:seq"]) == 1)
        #expect(againLog.errors.isEmpty, "\(againLog.errors)")
        await world.cleanUp()
    }

    /// The REPL says both, as JSON events: received messages it could not save, and a send
    /// it could not write; then shows the messages once the disk has room.
    @Test func theREPLReportsAFullDiskAsErrorEvents() async throws {
        let world = try await FullDiskWorld.start(bobConnects: false)
        defer { world.disk.unmount() }
        let configHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: configHome) }
        let repl = try ChildProcess(try productPath("simp"),
                                    ["repl", "--no-e2e", "--json", "--server", "127.0.0.1:\(world.cluster.addresses.tcpPort)",
                                     "--user", "bob", "--password", "pw-bob", "--data-dir", world.disk.path, "--linger", "0"],
                                    environment: ["XDG_CONFIG_HOME": configHome])
        defer { if repl.waitForExit(timeout: 0) == nil { repl.signal(SIGKILL) } }
        #expect(repl.waitForLine(timeout: 20) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(repl.stderr)")
        try world.disk.fill()

        let ids = try await world.aliceSends(2)
        // Both in one write, or one after the other: either way the last report ends at seq 2.
        #expect(repl.waitForLine(timeout: 30) { line in
            line.contains(#""event":"error""#) && line.contains("cannot save received messages (seq ")
                && (line.contains("(seq 2)") || line.contains("-2)"))
        } != nil, "\(repl.stdout)")
        repl.write("/send alice hello\n")
        #expect(repl.waitForLine(timeout: 30) { line in
            line.contains(#""event":"error""#) && line.contains("message not sent: cannot write it to the outbox")
        } != nil, "\(repl.stdout)")
        #expect(!jsonLines(repl.stdout).contains { $0["event"] as? String == "message" }, "\(repl.stdout)")

        try world.disk.free()
        #expect(repl.waitForLine(timeout: 30) { $0.contains(ids[1]) && $0.contains(#""event":"message""#) } != nil, "\(repl.stdout)")
        repl.write("/quit\n")
        #expect(repl.waitForExit(timeout: 20) == 0)
        let lines = jsonLines(repl.stdout)
        #expect(lines.filter { $0["event"] as? String == "message" }.compactMap { $0["id"] as? String } == ids)
        #expect(!lines.contains { $0["event"] as? String == "sent" })
        #expect(await world.aliceLog.wait { Set($0.delivered) == Set(ids) })
        await world.cleanUp()
    }

    private func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}

/// alice, and bob with a data directory on a small tmpfs.
private final class FullDiskWorld: @unchecked Sendable {
    let cluster: TestCluster
    let disk: SmallDisk
    let alice: SIMPClient
    let aliceLog: EventLog
    let bob: SIMPClient
    let bobLog: EventLog
    let bobConfiguration: ClientConfiguration

    private init(cluster: TestCluster, disk: SmallDisk, alice: (SIMPClient, EventLog), bob: SIMPClient, bobLog: EventLog,
                 bobConfiguration: ClientConfiguration) {
        self.cluster = cluster
        self.disk = disk
        (self.alice, self.aliceLog) = alice
        self.bob = bob
        self.bobLog = bobLog
        self.bobConfiguration = bobConfiguration
    }

    /// `bobsUDPPort`: where bob sends his datagrams instead of the server's UDP port.
    static func start(bobConnects: Bool = true, bobsUDPPort: Int? = nil) async throws -> FullDiskWorld {
        let cluster = try await TestCluster.start()
        let disk = try SmallDisk()
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = disk.path
        configuration.udpPortOverride = bobsUDPPort
        let bob = SIMPClient(configuration: configuration)
        let bobLog = EventLog(bob)
        do {
            try await bob.register(user: "bob", password: "pw-bob")
            if bobConnects { try await bob.connect(user: "bob", password: "pw-bob") }
            let alice = try await cluster.connectedClient("alice")
            return FullDiskWorld(cluster: cluster, disk: disk, alice: alice, bob: bob, bobLog: bobLog, bobConfiguration: configuration)
        } catch {
            disk.unmount()
            await cluster.stop()
            throw error
        }
    }

    /// alice's messages to bob, once the server has stored them all.
    func aliceSends(_ count: Int) async throws -> [String] {
        var ids: [String] = []
        for n in 1...count { ids.append(try await alice.send(to: "bob", text: "message \(n)")) }
        #expect(await aliceLog.wait { Set($0.accepted).isSuperset(of: ids) })
        return ids
    }

    /// The highest seq bob's errors said he could not save ("(seq 1-10)"), 0 if none.
    static func highestUnsaved(_ log: EventLog) -> Int {
        log.errors.compactMap { text -> Int? in
            guard text.hasPrefix("cannot save received messages (seq "),
                  let open = text.firstIndex(of: "("), let close = text.firstIndex(of: ")") else { return nil }
            return Int(text[open..<close].split(whereSeparator: { !$0.isNumber }).last ?? "")
        }.max() ?? 0
    }

    /// The confirmed mark is written on the router's next tick after the receipt.
    func ackedMark(becomes mark: Int) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if (try? redisInteger(["GET", "simp:{bob}:acked"])) == mark { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// An integer reply, or a bulk string holding one; nil for a missing key.
    func redisInteger(_ command: [String]) throws -> Int? {
        // ":10\r\n" or "$2\r\n10\r\n" ("\r\n" is one Character).
        let lines = try cluster.redis.command(command).split(separator: "\r\n")
        guard let first = lines.first else { return nil }
        if first.hasPrefix(":") { return Int(first.dropFirst()) }
        return lines.count >= 2 ? Int(lines[1]) : nil
    }

    func cleanUp() async {
        await bob.close()
        await alice.close()
        await cluster.stop()
    }
}

extension EventLog {
    var errors: [String] {
        all.compactMap { if case .error(let text, _) = $0 { return text } else { return nil } }
    }
}

/// An 8 MiB tmpfs of the test's own, and a file that takes its last byte.
final class SmallDisk: @unchecked Sendable {
    let path: String
    private var filler: String { path + "/filler" }
    private var mounted = true

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("simp-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        // Room for SQLite's WAL, which grows to 1,000 pages (4 MiB) before it is checkpointed
        // into the database: on a 512 KiB tmpfs the WAL of an encrypting client (a group state
        // written with each message opened) took all the room the free gave back, and every
        // write after the first few failed again.
        guard mount("tmpfs", path, "tmpfs", 0, "size=8m") == 0 else {
            let reason = String(cString: strerror(errno))
            try? FileManager.default.removeItem(atPath: path)
            throw TestSupportError("cannot mount a tmpfs on \(path): \(reason)")
        }
    }

    /// Root, and a kernel that lets it mount a tmpfs (not in every container).
    static let canMount: Bool = {
        guard geteuid() == 0, let disk = try? SmallDisk() else { return false }
        disk.unmount()
        return true
    }()

    /// Writes until the file system refuses: a page at a time, then byte by byte, so not a
    /// byte is left.
    func fill() throws {
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw TestSupportError("cannot create \(filler): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let page = [UInt8](repeating: 0xAB, count: 4096)
        for size in [page.count, 1] {
            while page.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) == size {}
            guard errno == ENOSPC else { throw TestSupportError("writing \(filler): \(String(cString: strerror(errno)))") }
        }
    }

    func free() throws {
        try FileManager.default.removeItem(atPath: filler)
    }

    /// Detached, so a file still open (a client's database) does not keep it mounted.
    func unmount() {
        guard mounted else { return }
        mounted = false
        umount2(path, Int32(MNT_DETACH))
        try? FileManager.default.removeItem(atPath: path)
    }
}
