import Foundation
import NIOConcurrencyHelpers
@testable import SIMPClient
import SIMPCore
import SIMPMLS
import SIMPTestSupport
import Testing

/// End-to-end encrypted one-to-one conversations (docs/E2EE.md, Part 4) against a real server
/// and Redis: each side's device decrypts what the other wrote, across a restart of the
/// receiver, for a long text too; the server's Redis holds none of the text; a peer without
/// keys cannot be sent to; a verified peer whose identity changed is not sent to until verified
/// again; a sealed message this device cannot open is reported, never shown as ciphertext.
@Suite(.serialized) struct EncryptedConversationTests {
    static func connected(_ cluster: TestCluster, _ user: String, _ directory: String, endToEnd: Bool = true,
                          device: String = "phone") async throws -> (SIMPClient, EventLog) {
        var configuration = cluster.clientConfiguration()
        configuration.dataDirectory = directory
        configuration.device = device
        configuration.directoryCheckInterval = .zero
        configuration.endToEnd = endToEnd
        let client = SIMPClient(configuration: configuration)
        let log = EventLog(client)
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    /// alice and bob registered, connected with a data directory each (the first two of
    /// `directories`), each with an identity made on this device.
    static func aliceAndBob(_ cluster: TestCluster, _ directories: [String]) async throws
        -> (alice: (SIMPClient, EventLog), bob: (SIMPClient, EventLog)) {
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let alice = try await connected(cluster, "alice", directories[0])
        let bob = try await connected(cluster, "bob", directories[1])
        #expect(try await alice.0.setUpIdentity() == .created)
        #expect(try await bob.0.setUpIdentity() == .created)
        return (alice, bob)
    }

    /// `aliceAndBob`, and alice's first message ("before the change") read by bob: their
    /// conversation's MLS group is made.
    static func aliceAndBobTalking(_ cluster: TestCluster, _ directories: [String]) async throws
        -> (pair: (alice: (SIMPClient, EventLog), bob: (SIMPClient, EventLog)), first: String) {
        let pair = try await aliceAndBob(cluster, directories)
        let first = try await pair.alice.0.send(to: "bob", text: "before the change")
        #expect(await pair.bob.1.wait { $0.messages.contains { $0.id == first && $0.text == "before the change" } })
        return (pair, first)
    }

    /// A cluster, three data directories (alice's and bob's first, a third for a new device)
    /// and `aliceAndBobTalking` on them.
    struct Talking {
        let cluster: TestCluster
        let directories: [String]
        let alice: (SIMPClient, EventLog)
        let bob: (SIMPClient, EventLog)
        /// alice's first message, which bob read.
        let first: String

        func removeDirectories() {
            for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        }
    }

    static func talking() async throws -> Talking {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        let (pair, first) = try await aliceAndBobTalking(cluster, directories)
        return Talking(cluster: cluster, directories: directories, alice: pair.alice, bob: pair.bob, first: first)
    }

    /// Every value in Redis, read by type, as one string: what someone with the server's Redis sees.
    static func everythingInRedis(_ cluster: TestCluster) throws -> String {
        var dump = ""
        for key in try TypingTests.keys(cluster) {
            let type = try cluster.redis.command(["TYPE", key]).trimmingCharacters(in: .whitespacesAndNewlines)
            let read: [String] = switch type {
            case "+string": ["GET", key]
            case "+list": ["LRANGE", key, "0", "-1"]
            case "+hash": ["HGETALL", key]
            case "+set": ["SMEMBERS", key]
            case "+zset": ["ZRANGE", key, "0", "-1"]
            case "+stream": ["XRANGE", key, "-", "+"]
            default: ["TYPE", key]
            }
            dump += key + "\n" + (try cluster.redis.command(read)) + "\n"
        }
        return dump
    }

    @Test func bothSidesReadEachOtherAndRedisHoldsOnlyCiphertext() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await Self.aliceAndBob(cluster, directories)
        let (alice, aliceLog) = pair.alice
        var (bob, bobLog) = pair.bob

        let secret = "the owl flies at midnight"
        let first = try await alice.send(to: "bob", text: secret)
        #expect(await bobLog.wait { $0.messages.contains { $0.id == first } })
        let got = try #require(bobLog.messages.first { $0.id == first })
        #expect(got.text == secret && got.encrypted && got.from == "alice")
        #expect(await aliceLog.wait { $0.delivered.contains(first) })

        let reply = try await bob.send(to: "alice", text: "the raven answers at dawn")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "the raven answers at dawn" && $0.encrypted } })

        // The receiver restarts: its group comes back from its data directory.
        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        let long = String(repeating: "a long sealed text of many parts; ", count: 1_800)
        let longID = try await alice.send(to: "bob", text: long)
        #expect(await bobLog.wait(timeout: .seconds(60)) { $0.messages.contains { $0.id == longID } })
        #expect(bobLog.messages.first { $0.id == longID }?.text == long)
        #expect(await aliceLog.wait(timeout: .seconds(60)) { $0.delivered.contains(longID) })
        #expect(!bobLog.all.contains { if case .undecryptable = $0 { true } else { false } })
        #expect(bob.decryptionFailures().isEmpty && alice.decryptionFailures().isEmpty)

        // The history shows the plaintext, from the device's own store.
        let history = try await bob.messages(in: "alice")
        #expect(history.contains { $0.text == secret })
        // `history(with:)` too (what `/history` prints): the device's store, not the server's
        // ciphertext.
        let told = try await bob.history(with: "alice")
        #expect(told.contains { $0.id == first && $0.text == secret && $0.from == "alice" && $0.to == "bob" })
        #expect(told.contains { $0.id == reply && $0.text == "the raven answers at dawn" && $0.from == "bob" && $0.to == "alice" })

        // A control: a client without encryption, whose text the same dump does find.
        try await cluster.register("carol")
        let (carol, _) = try await Self.connected(cluster, "carol", LocalHistoryTests.directory(), endToEnd: false)
        let plain = try await carol.send(to: "alice", text: "a plaintext control")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == plain && !$0.encrypted } })

        let redis = try Self.everythingInRedis(cluster)
        for text in [secret, "the raven answers", "a long sealed text"] {
            #expect(!redis.contains(text), "\(text) is in Redis")
        }
        #expect(redis.contains("a plaintext control"), "the dump reads what Redis holds")
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    @Test func aNewIdentityHoldsSendingToAVerifiedPeerAndTheNewDeviceIsAddedByCommit() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        let first = talking.first
        try await alice.markVerified("bob", number: try await alice.safetyNumber(with: "bob").number)

        // bob loses his device and makes a new identity on a new one.
        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[2], device: "tablet")
        #expect(try await bob.setUpIdentity(newIdentity: true) == .created)

        // alice is told before anything more goes, and nothing goes until she verifies again.
        let held = await #expect(throws: ClientError.self) { try await alice.send(to: "bob", text: "held back") }
        #expect(held?.code == .identityChanged)
        #expect(await aliceLog.wait { $0.all.contains(.identityChanged(user: "bob")) })
        #expect(aliceLog.accepted == [first], "only the first was sent")
        let number = try await alice.safetyNumber(with: "bob").number
        try await alice.markVerified("bob", number: number)

        // The next send removes the old device and adds the new one by commit; the new one reads it.
        let after = try await alice.send(to: "bob", text: "after the change")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == after && $0.text == "after the change" && $0.encrypted } })
        let reply = try await bob.send(to: "alice", text: "the new device answers")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "the new device answers" } })
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// bob loses his phone and makes a new identity on a new device he names phone too. The old
    /// leaf (bob/phone under the old device key, which whoever holds the old phone's state reads
    /// with) is not the new device: alice's next send removes it and adds the new one, which
    /// reads that send. Judged by name alone, the old leaf counted as bob's phone: it stayed,
    /// and the new phone was never added.
    @Test func aNewDeviceUnderTheOldOnesNameReplacesItsLeaf() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        let store = try await alice.identityStore()
        func bobsPhones() throws -> [[UInt8]] {
            let group = try MLSGroup(savedState: try #require(try store.groupState(of: "bob")), credentialValidator: nil, proposalApprover: nil)
            return ConversationKeys.memberDevices(group).values.filter { $0.identity == Array("bob/phone".utf8) }.map(\.key)
        }
        let oldPhone = try bobsPhones()
        #expect(oldPhone.count == 1)

        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[2])
        #expect(try await bob.setUpIdentity(newIdentity: true) == .created)

        let after = try await alice.send(to: "bob", text: "after the change")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == after && $0.text == "after the change" && $0.encrypted } })
        let phones = try bobsPhones()
        #expect(phones.count == 1 && phones != oldPhone, "one bob/phone leaf, under the new device's key")
        let reply = try await bob.send(to: "alice", text: "the new phone answers")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "the new phone answers" } })
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// bob makes a new identity on the device he still has (his other device was stolen, say),
    /// in the same data directory: its conversations were kept under the old device key, which
    /// the server no longer certifies. They are dropped (what they read stays in the history).
    /// Until a device of the conversation adds it again, bob's send says so (the Welcome the
    /// server holds for bob/phone is to the old keys); alice's next send adds it under its new
    /// key by a Welcome, and both sides read each other again. Without the drop, bob's device
    /// went on with the group of its old key: it could not read alice's send (removed from
    /// that group) and nothing it sent arrived.
    @Test func aNewIdentityMadeInTheSameDataDirectoryRejoinsItsConversations() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        let first = talking.first

        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(try await bob.setUpIdentity(newIdentity: true) == .created)
        let early = await #expect(throws: ClientError.self) { try await bob.send(to: "alice", text: "too early") }
        #expect(early?.code == .endToEnd && early?.message.contains("not in the encrypted conversation with alice under its current keys") == true,
                "\(String(describing: early))")

        let after = try await alice.send(to: "bob", text: "after the change")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == after && $0.text == "after the change" && $0.encrypted } })
        let reply = try await bob.send(to: "alice", text: "the same phone answers")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "the same phone answers" } })
        #expect(try await bob.history(with: "alice").contains { $0.id == first }, "what bob read before stays in his history")
        #expect(bob.decryptionFailures().isEmpty, "nothing shown undecryptable")
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// As above, online: alice is told of bob's new device (a KEYS datagram once its first
    /// KeyPackages are stored), says bob's identity changed, and commits the device in at once:
    /// bob's send works without a message of alice's first. As `contacts`, or as peers who are
    /// no contacts and share no group: the server remembers them as each other's peers once
    /// their conversation's first commit is stored (before 2026-12-01 alice was then outside
    /// bob's circle, and his sends failed until she sent).
    @Test(arguments: [true, false])
    func aPeerWithANewIdentityIsAddedWithoutASend(contacts: Bool) async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        if contacts {
            _ = try await bob.addContact("alice")
            _ = try await alice.acceptContact("bob")
        }
        #expect(try await alice.contacts().contacts.isEmpty == !contacts)
        // The Welcome his old keys joined from: a new one must come after it.
        let old = try #require(try await bob.fetchCommits(in: "alice", fromEpoch: 0, join: true).welcome?.epoch)

        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(try await bob.setUpIdentity(newIdentity: true) == .created)
        #expect(await aliceLog.wait { $0.all.contains(.identityChanged(user: "bob")) }, "alice is told before anything is sent")
        #expect(await eventually { try await bob.fetchCommits(in: "alice", fromEpoch: 0, join: true).welcome.map { $0.epoch > old } == true },
                "alice's device commits bob's new one in without a send")
        let reply = try await bob.send(to: "alice", text: "new keys, same phone")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "new keys, same phone" && $0.encrypted } })
        #expect(alice.decryptionFailures().isEmpty && bob.decryptionFailures().isEmpty)
        _ = bobLog
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// alice is away when bob makes a new identity: the KEYS datagram reaches no device of hers,
    /// the notice stored in her inbox does when she is back, and her device commits bob's new
    /// one in without anyone sending; bob then writes to her. Before the notice, bob's sends
    /// failed until alice sent.
    @Test func aContactAwayWhenItsPeerGotANewIdentityAddsItWhenBack() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        var (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        _ = try await bob.addContact("alice")
        _ = try await alice.acceptContact("bob")
        let old = try #require(try await bob.fetchCommits(in: "alice", fromEpoch: 0, join: true).welcome?.epoch)

        await alice.close()
        await bob.close()
        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(try await bob.setUpIdentity(newIdentity: true) == .created)
        await #expect(throws: ClientError.self, "nobody can add bob's new device yet") {
            _ = try await bob.send(to: "alice", text: "too early")
        }

        (alice, aliceLog) = try await Self.connected(cluster, "alice", directories[0])
        #expect(await aliceLog.wait { $0.all.contains(.identityChanged(user: "bob")) }, "told by the stored notice")
        #expect(await eventually { try await bob.fetchCommits(in: "alice", fromEpoch: 0, join: true).welcome.map { $0.epoch > old } == true },
                "alice's device, back, commits bob's new one in without a send")
        let reply = try await bob.send(to: "alice", text: "new keys while you were away")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "new keys while you were away" && $0.encrypted } })
        #expect(!aliceLog.messages.contains { $0.text.isEmpty }, "the notice is never shown")
        #expect(alice.decryptionFailures().isEmpty && bob.decryptionFailures().isEmpty)
        _ = bobLog
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// bob is away while alice links a laptop (a commit adds it) and revokes it (a commit removes
    /// it): back, bob's device catches up through the commit that added the laptop, whose
    /// certificate the directory now lists as revoked, and reads what alice sent with the laptop
    /// in and after its removal.
    @Test func aDeviceAwayCatchesUpThroughADeviceAddedAndRevokedMeanwhile() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        await bob.close()

        let (laptop, laptopLog) = try await Self.connected(cluster, "alice", directories[2], device: "laptop")
        let shown = DeviceLinkingTests.ShownCode()
        let linking = Task { try await laptop.linkThisDevice(timeoutSeconds: 60) { shown.show($0) } }
        let code = try #require(try await DeviceLinkingTests.code(of: "laptop", on: alice))
        try await alice.approveLink(device: "laptop", code: code)
        #expect(try await linking.value == .ready)
        let whileAway = try await alice.send(to: "bob", text: "the laptop is in")
        #expect(await laptopLog.wait { $0.messages.contains { $0.id == whileAway && $0.text == "the laptop is in" && $0.encrypted } },
                "a commit added the laptop")
        try await alice.revokeDevice("laptop")
        let afterRevoking = try await alice.send(to: "bob", text: "the laptop is out")
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == 3, "the group's creation, the laptop's addition and removal")
        let directory = try await alice.keyDirectory(of: "alice")
        #expect(directory.revokedDevices.map(\.device) == ["laptop"] && directory.devices.map(\.device) == ["phone"])

        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(await bobLog.wait { log in
            [(whileAway, "the laptop is in"), (afterRevoking, "the laptop is out")].allSatisfy { id, text in
                log.messages.contains { $0.id == id && $0.text == text && $0.encrypted }
            }
        })
        #expect(!bobLog.all.contains { if case .undecryptable = $0 { true } else if case .commitRefused = $0 { true } else { false } },
                "\(bobLog.all.filter { if case .message = $0 { false } else { true } })")
        #expect(bob.decryptionFailures().isEmpty)
        let reply = try await bob.send(to: "alice", text: "back and reading")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == reply && $0.text == "back and reading" && $0.encrypted } })
        for client in [alice, bob, laptop] { await client.close() }
        await cluster.stop()
    }

    /// bob is away while alice's phone renews its keys by an Update (a commit with a path) and
    /// sends, and alice then loses her phone and makes a new identity on a tablet, which ends the
    /// directory's list of her revoked certificates. Back, bob's device catches up through the
    /// Update: it saw the phone's certificate current before it went away, so the commit passes,
    /// it reads what the phone sent after it, and its next send replaces alice's phone by her
    /// tablet, which reads it. Without what it saw, it refused the Update and read nothing more.
    @Test func aDeviceAwayOverAPeersNewIdentityCatchesUpThroughACommitOfADeviceItSaw() async throws {
        let talking = try await Self.talking()
        defer { talking.removeDirectories() }
        let (cluster, directories) = (talking.cluster, talking.directories)
        let (alice, aliceLog) = talking.alice
        var (bob, bobLog) = talking.bob
        await bob.close()

        // An Update after every sealed message: the next send commits one first.
        let store = try await alice.identityStore()
        let keys = try ConversationKeys(store: store, user: "alice", device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 1, millis: .max))
        alice.keyring.withLock { $0 = keys }
        let made = try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch
        let whileAway = try await alice.send(to: "bob", text: "renewed while you were away")
        #expect(await aliceLog.wait { $0.accepted.contains(whileAway) })
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == made + 1, "an Update before the message")
        await alice.close()

        let (tablet, tabletLog) = try await Self.connected(cluster, "alice", directories[0] + "-tablet", device: "tablet")
        defer { try? FileManager.default.removeItem(atPath: directories[0] + "-tablet") }
        #expect(try await tablet.setUpIdentity(newIdentity: true) == .created)
        let directory = try await tablet.keyDirectory(of: "alice")
        #expect(directory.devices.map(\.device) == ["tablet"] && directory.revokedDevices.isEmpty, "the phone's certificate is gone")

        (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(await bobLog.wait { $0.messages.contains { $0.id == whileAway && $0.text == "renewed while you were away" && $0.encrypted } })
        #expect(bob.decryptionFailures().isEmpty, "\(bob.decryptionFailures())")
        let reply = try await bob.send(to: "alice", text: "back, and reading your tablet")
        #expect(await tabletLog.wait { $0.messages.contains { $0.id == reply && $0.text == "back, and reading your tablet" && $0.encrypted } })
        for client in [bob, tablet] { await client.close() }
        await cluster.stop()
    }

    @Test func aDeviceRenewsItsKeysByAnUpdateAfterItsMessagesAndThePeerFollows() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await Self.aliceAndBob(cluster, directories)
        let (alice, (bob, bobLog)) = (pair.alice.0, pair.bob)
        // An Update after every 3 sealed messages instead of 1,000.
        let store = try await alice.identityStore()
        let keys = try ConversationKeys(store: store, user: "alice", device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 3, millis: .max))
        alice.keyring.withLock { $0 = keys }

        var ids: [String] = []
        for i in 1...7 { ids.append(try await alice.send(to: "bob", text: "message \(i)")) }
        #expect(await bobLog.wait { log in ids.allSatisfy { id in log.messages.contains { $0.id == id && $0.encrypted } } })
        #expect(bobLog.messages.map(\.text) == (1...7).map { "message \($0)" })
        // The group's creation, then an Update before the 4th and the 7th message.
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == 3)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// A device stopped after the server stored its commit (an Update), before it kept the state
    /// the commit leads to: restarted on what a `kill -9` there leaves (the data directory copied
    /// at that moment), it cannot process its own commit, so it takes the state it kept with
    /// the commit beforehand (docs/E2EE.md, Part 3, "A commit kept before it is submitted"), and
    /// both sides go on reading each other.
    @Test func aDeviceStoppedBetweenItsCommitAndItsStateTakesThePendingState() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await Self.aliceAndBob(cluster, directories)
        let (alice, (bob, bobLog)) = (pair.alice.0, pair.bob)
        let store = try await alice.identityStore()
        let keys = try ConversationKeys(store: store, user: "alice", device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 2, millis: .max))
        // The first commit stored is the group's making; the second, the Update before message
        // 3. There the data directory is copied and the device stops (its keys' actor waits):
        // nothing after the commit is sealed by it, as after a kill -9.
        let stored = NIOLockedValueBox(0)
        let stopped = DispatchSemaphore(value: 0)
        let source = directories[0]
        let copy = directories[2]
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        await keys.setAfterCommitStored { _ in
            guard stored.withLockedValue({ count in count += 1; return count }) == 2 else { return }
            for file in (try? FileManager.default.contentsOfDirectory(atPath: source)) ?? [] {
                try? FileManager.default.copyItem(atPath: source + "/" + file, toPath: copy + "/" + file)
            }
            stopped.wait()
        }
        alice.keyring.withLock { $0 = keys }
        let sending = Task { for i in 1...3 { _ = try await alice.send(to: "bob", text: "before \(i)") } }
        #expect(await bobLog.wait { log in log.messages.filter(\.encrypted).count == 2 })
        for _ in 0..<3000 where stored.withLockedValue({ $0 }) < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(stored.withLockedValue { $0 } == 2, "the Update was stored")
        #expect(try await bob.fetchCommits(in: "alice", fromEpoch: 0).epoch == 2, "made, then updated")
        await alice.close()

        let (restarted, restartedLog) = try await Self.connected(cluster, "alice", copy)
        #expect(try await restarted.setUpIdentity() == .ready, "the copy holds alice's identity")
        let after = try await restarted.send(to: "bob", text: "after the restart")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == after && $0.text == "after the restart" } })
        let reply = try await bob.send(to: "alice", text: "bob on the new epoch")
        #expect(await restartedLog.wait { $0.messages.contains { $0.id == reply && $0.text == "bob on the new epoch" && $0.encrypted } })
        for log in [restartedLog, bobLog] {
            #expect(log.all.allSatisfy { if case .undecryptable = $0 { false } else if case .commitRefused = $0 { false } else { true } },
                    "nothing refused, nothing undecryptable: \(log.all.filter { if case .message = $0 { false } else { true } })")
        }
        #expect(try await restarted.fetchCommits(in: "bob", fromEpoch: 0).epoch == 2, "no second commit for epoch 1")
        for client in [restarted, bob] { await client.close() }
        stopped.signal()
        _ = await sending.result
        await cluster.stop()
    }

    @Test func aServerThatRequiresEncryptionRefusesPlaintextToUsers() async throws {
        let cluster = try await TestCluster.start { $0.endToEnd = .required }
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await Self.connected(cluster, "alice", directories[0])
        let (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1], endToEnd: false)
        #expect(try await alice.setUpIdentity() == .created)
        #expect(try await bob.setUpIdentity() == .created, "bob's device has keys, but sends in plaintext")

        let plain = try await bob.send(to: "alice", text: "in the clear")
        #expect(await bobLog.wait { log in log.all.contains { if case .failed(id: plain, _, _, .e2eRequired?) = $0 { true } else { false } } })
        let sealed = try await alice.send(to: "bob", text: "sealed is taken")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == sealed && $0.text == "sealed is taken" } })
        #expect(!aliceLog.messages.contains { $0.id == plain }, "the refused one was not stored")
        // A group is no exception: plaintext to it is refused, sealed is taken.
        try await bob.set(.groupAdds(.everyone))
        _ = try await alice.createGroup("pair", members: ["bob"])
        let plainToGroup = try await bob.send(to: "#pair", text: "the group in the clear")
        #expect(await bobLog.wait { log in log.all.contains { if case .failed(id: plainToGroup, _, _, .e2eRequired?) = $0 { true } else { false } } })
        let sealedToGroup = try await alice.send(to: "#pair", text: "the group sealed")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == sealedToGroup && $0.text == "the group sealed" } })
        #expect(cluster.metric("simp_plaintext_refused_total") == 2)
        #expect(cluster.metric("simp_messages_sealed_total") == 2)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func simpE2ESendsSealedAndPrintsWhatItDecrypted() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        let configHome = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)").path
        defer { for directory in directories + [configHome] { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (bob, bobLog) = try await Self.connected(cluster, "bob", directories[1])
        #expect(try await bob.setUpIdentity() == .created)
        try Self.addUncertifiedDevice(cluster, of: "bob")

        let repl = try ChildProcess(try productPath("simp"), ["--server", "127.0.0.1:\(cluster.addresses.tcpPort)", "--user", "alice",
                                                             "--password", "pw-alice", "--data-dir", directories[0], "--e2e", "--json"],
                                    environment: ["XDG_CONFIG_HOME": configHome])
        #expect(repl.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil, "stderr: \(repl.stderr)")
        repl.write("/send bob sealed from the command line\n")
        #expect(await bobLog.wait { $0.messages.contains { $0.text == "sealed from the command line" && $0.encrypted } })
        // The device the server added to bob's directory is warned of, not encrypted to.
        #expect(repl.waitForLine(timeout: 30) { $0 == #"{"device":"evil","event":"uncertified-device","user":"bob"}"# } != nil,
                "printed: \(repl.stdout)")
        _ = try await bob.send(to: "alice", text: "and back to the REPL")
        let line = repl.waitForLine(timeout: 30) { $0.contains("and back to the REPL") }
        #expect(line?.contains(#""encrypted":true"#) == true, "printed: \(line ?? repl.stdout)")
        repl.write("/quit\n")
        #expect(repl.waitForExit(timeout: 30) == 0, "stderr: \(repl.stderr)")
        // Without --data-dir, simp keeps the keys in a data directory of its own: EndToEndDefaultTests.
        await bob.close()
        await cluster.stop()
    }

    @Test func aPeerWithoutKeysIsNotSentToAndAnUnopenableMessageIsReported() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await Self.connected(cluster, "alice", directories[0])
        let (carol, carolLog) = try await Self.connected(cluster, "carol", directories[1], endToEnd: false)
        #expect(try await alice.setUpIdentity() == .created)

        // carol has no identity and no KeyPackages: nothing goes to her.
        let error = await #expect(throws: ClientError.self) { try await alice.send(to: "carol", text: "not for the server") }
        #expect(error?.code == .noIdentity)
        #expect(aliceLog.accepted.isEmpty)

        // bob's device makes its keys, then loses its data directory: what alice sealed for it
        // cannot be opened by the device that comes back with a new one. It is reported,
        // confirmed, and never shown as ciphertext.
        let (bob, _) = try await Self.connected(cluster, "bob", directories[2])
        #expect(try await bob.setUpIdentity() == .created)
        await bob.close()
        try FileManager.default.removeItem(atPath: directories[2])
        let sent = try await alice.send(to: "bob", text: "sealed for the old device")
        #expect(await aliceLog.wait { $0.accepted.contains(sent) })
        let (again, againLog) = try await Self.connected(cluster, "bob", directories[2], endToEnd: false)
        #expect(await againLog.wait { log in log.all.contains { if case .undecryptable(from: "alice", id: sent, _) = $0 { true } else { false } } })
        #expect(!againLog.messages.contains { $0.id == sent })
        #expect(again.decryptionFailures() == [.noKeys: 1], "counted by cause")
        #expect(await aliceLog.wait { $0.delivered.contains(sent) }, "confirmed, so it is not pushed forever")
        _ = carolLog
        for client in [alice, carol, again] { await client.close() }
        await cluster.stop()
    }

    /// What a malicious server does to add a device of its own to `user`'s key directory (a
    /// write to its Redis): a certificate `user`'s identity never signed, for a key the server
    /// holds, and a KeyPackage of that key.
    static func addUncertifiedDevice(_ cluster: TestCluster, of user: String, name: String = "evil") throws {
        let evil = try KeyFixtures.deviceSigner()
        let package = try KeyFixtures(user).keyPackage(name, evil)
        let certificate = Array(evil.publicKey.rawRepresentation) + [UInt8](repeating: 0x5a, count: 64)
        let keys = try TypingTests.keys(cluster)
        let devcerts = try #require(keys.first { $0.hasSuffix("{\(user)}:devcerts") })
        let keypkgs = devcerts.replacingOccurrences(of: ":devcerts", with: ":keypkgs")
        let hex = { (bytes: [UInt8]) in bytes.map { String(format: "%02x", $0) }.joined() }
        _ = try cluster.redis.command(["EVAL", """
            local function unhex(h) return (h:gsub('..', function(c) return string.char(tonumber(c, 16)) end)) end
            redis.call('HSET', KEYS[1], ARGV[3], unhex(ARGV[1]))
            redis.call('ZADD', KEYS[2], 0, ARGV[3] .. string.char(0) .. unhex(ARGV[2]))
            return 1
            """, "2", devcerts, keypkgs, hex(certificate), hex(package), name])
    }

    /// A malicious server (here: a write to its Redis) adds a device to alice's directory: a
    /// certificate her identity never signed, and a KeyPackage of its key. bob's device does not
    /// encrypt to it (no Welcome is made for it, its leaf is never added), and alice reads bob.
    /// Both are warned, once each however often they read the directory: bob of a device of
    /// his peer's, alice of one of her own, that her identity never certified.
    @Test func aDeviceTheServerAddsIsNotEncryptedTo() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let pair = try await Self.aliceAndBob(cluster, directories)
        let (alice, aliceLog) = pair.alice
        let (bob, bobLog) = pair.bob

        try Self.addUncertifiedDevice(cluster, of: "alice")
        #expect(try await bob.keyDirectory(of: "alice").devices.map(\.device).sorted() == ["evil", "phone"], "the server serves it")
        #expect(try await bob.keyDirectory(of: "alice").verifiedDevices.map(\.device) == ["phone"], "it does not verify")

        let id = try await bob.send(to: "alice", text: "for alice's real device")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == id && $0.encrypted } })
        // The commit that made the group has Welcomes for alice's phone only.
        let welcomed = try TypingTests.keys(cluster).filter { $0.hasSuffix(":welcomes") }
            .flatMap { try cluster.redis.command(["HKEYS", $0]).split(separator: "\r\n").map(String.init) }
        #expect(welcomed.contains("alice/phone") && !welcomed.contains { $0.contains("evil") }, "welcomed: \(welcomed)")
        let warned = { (log: EventLog) in log.all.filter { if case .uncertifiedDevice = $0 { true } else { false } } }
        #expect(await bobLog.wait { warned($0) == [.uncertifiedDevice(user: "alice", device: "evil")] })
        #expect(bob.securityWarnings() == [.uncertifiedDevice: 1])
        let reply = try await alice.send(to: "bob", text: "and back")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == reply && $0.encrypted } })
        #expect(await aliceLog.wait { warned($0) == [.uncertifiedDevice(user: "alice", device: "evil")] })
        #expect(warned(bobLog).count == 1, "once, however often the directory is read")
        #expect(alice.securityWarnings() == [.uncertifiedDevice: 1] && bob.securityWarnings() == [.uncertifiedDevice: 1])
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}
