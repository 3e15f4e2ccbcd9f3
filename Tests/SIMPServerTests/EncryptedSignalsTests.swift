import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Read receipts and typing between encrypting users (docs/E2EE.md, Part 7) against a real
/// server and Redis: they travel sealed in the conversation's MLS group and are applied; what
/// was read is nowhere in what the server stores; a plain or forged receipt or typing the server
/// hands an encrypting device for an encrypted conversation is dropped and counted; a client
/// that does not encrypt keeps the plain forms; `--e2e required` refuses the plain forms.
@Suite(.serialized) struct EncryptedSignalsTests {
    typealias E2E = EncryptedConversationTests

    /// How many times `needle` occurs in `haystack`.
    static func occurrences(of needle: String, in haystack: String) -> Int {
        haystack.components(separatedBy: needle).count - 1
    }

    /// alice and bob (both encrypting), their conversation's group made by a first message
    /// alice sent and bob read.
    static func encryptedPair(_ cluster: TestCluster, _ directories: [String]) async throws
        -> (alice: SIMPClient, aliceLog: EventLog, bob: SIMPClient, bobLog: EventLog, first: IncomingMessage) {
        let pair = try await E2E.aliceAndBob(cluster, directories)
        let (alice, aliceLog) = pair.alice
        let (bob, bobLog) = pair.bob
        let id = try await alice.send(to: "bob", text: "the first, which makes the group")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == id && $0.encrypted } })
        let first = try #require(bobLog.messages.first { $0.id == id })
        return (alice, aliceLog, bob, bobLog, first)
    }

    @Test func aReadReceiptAndTypingTravelSealedAndAreApplied() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<3).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        var (alice, aliceLog, bob, bobLog, first) = try await Self.encryptedPair(cluster, directories)
        let second = try await alice.send(to: "bob", text: "the second")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == second } })
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: [first.id, second]) })

        // alice is away: what bob's read leaves stays in her inbox, where a dump of Redis sees it.
        await alice.close()
        let stored = cluster.metric("simp_messages_stored_total")
        let before = try E2E.everythingInRedis(cluster)
        try await bob.markRead(bobLog.messages.filter { [first.id, second].contains($0.id) })
        #expect(await waitFor { cluster.metric("simp_messages_stored_total") == stored + 1 }, "one sealed read, stored")
        // What was read is nowhere the server keeps it: the ids appear in Redis no more often than
        // before (a READ notice would name them in alice's inbox).
        let after = try E2E.everythingInRedis(cluster)
        for id in [first.id, second] {
            #expect(Self.occurrences(of: id, in: after) == Self.occurrences(of: id, in: before), "\(id) was told in the clear")
        }
        #expect(cluster.metric("simp_messages_sealed_total") == 3, "two texts and the read, sealed")
        // bob's client heard nothing of the sealed read it sent (no accepted, delivered or failed).
        #expect(bobLog.accepted.isEmpty && bobLog.failed.isEmpty)

        // alice comes back: the read is applied, by bob, for both.
        (alice, aliceLog) = try await E2E.connected(cluster, "alice", directories[0])
        #expect(await aliceLog.wait { Set($0.reads.map(\.id)) == [first.id, second] }, "\(aliceLog.reads)")
        #expect(aliceLog.reads.allSatisfy { $0.by == "bob" })

        // Typing both ways, sealed, shown.
        try bob.sendTyping(to: "alice")
        #expect(await aliceLog.wait { $0.typing.map(\.from) == ["bob"] })
        try alice.sendTyping(to: "bob")
        #expect(await bobLog.wait { $0.typing.map(\.from) == ["alice"] })
        #expect(cluster.metric("simp_typing_relayed_total") == 2)
        #expect(alice.droppedSignals().isEmpty && bob.droppedSignals().isEmpty, "\(alice.droppedSignals()) \(bob.droppedSignals())")
        // A typing does not move bob's group past a message still on its way: alice's next text opens.
        let third = try await alice.send(to: "bob", text: "after the typing")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == third && $0.text == "after the typing" } })
        #expect(bob.decryptionFailures().isEmpty && alice.decryptionFailures().isEmpty)

        // A mixed pair: carol does not encrypt; alice's read of carol's message goes plain, as
        // before, and the same dump finds its id in carol's inbox (carol away).
        try await cluster.register("carol")
        var (carol, _) = try await E2E.connected(cluster, "carol", directories[2], endToEnd: false)
        let plain = try await carol.send(to: "alice", text: "from a client without encryption")
        #expect(await aliceLog.wait { $0.messages.contains { $0.id == plain && !$0.encrypted } })
        await carol.close()
        let plainStored = cluster.metric("simp_messages_stored_total")
        let plainBefore = try E2E.everythingInRedis(cluster)
        try await alice.markRead(aliceLog.messages.filter { $0.id == plain })
        #expect(await waitFor { cluster.metric("simp_messages_stored_total") == plainStored + 1 }, "one READ notice")
        #expect(Self.occurrences(of: plain, in: try E2E.everythingInRedis(cluster)) > Self.occurrences(of: plain, in: plainBefore),
                "a plain read is stored in the clear: the check above would see one")
        let carolLog: EventLog
        (carol, carolLog) = try await E2E.connected(cluster, "carol", directories[2], endToEnd: false)
        #expect(await carolLog.wait { $0.reads.map(\.id) == [plain] })
        try carol.sendTyping(to: "alice")
        #expect(await aliceLog.wait { $0.typing.map(\.from) == ["bob", "carol"] }, "plain typing where nothing is encrypted")
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    @Test func everyDeviceOfTheSenderAndTheReadersOtherDevicesHearASealedRead() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        // alice has a phone and a laptop linked to it; bob one device.
        let (phone, laptop, bob, carol) = try await EncryptedGroupTests.people(cluster, directories)
        let toBob = try await phone.client.send(to: "bob", text: "from alice's phone")
        #expect(await bob.log.wait { $0.messages.contains { $0.id == toBob && $0.encrypted } })
        try await bob.client.markRead(bob.log.messages.filter { $0.id == toBob })
        for device in [phone, laptop] {
            #expect(await device.log.wait { $0.reads.contains { $0.id == toBob && $0.by == "bob" } }, "\(device.log.reads)")
        }
        // alice reads on her laptop: bob hears it, and so does her phone (read elsewhere); the laptop nothing.
        let toAlice = try await bob.client.send(to: "alice", text: "from bob")
        #expect(await laptop.log.wait { $0.messages.contains { $0.id == toAlice && $0.encrypted } })
        try await laptop.client.markRead(laptop.log.messages.filter { $0.id == toAlice })
        #expect(await bob.log.wait { $0.reads.contains { $0.id == toAlice && $0.by == "alice" } }, "\(bob.log.reads)")
        #expect(await phone.log.wait { $0.reads.contains { $0.id == toAlice && $0.by == "alice" } }, "\(phone.log.reads)")
        #expect(!laptop.log.reads.contains { $0.id == toAlice })
        for device in [phone, laptop, bob] {
            #expect(device.client.droppedSignals().isEmpty && device.client.decryptionFailures().isEmpty)
        }
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    @Test func readReceiptsOffStopsSealedReadsBothWays() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (alice, aliceLog, bob, bobLog, first) = try await Self.encryptedPair(cluster, directories)
        let ids = try await ReadReceiptTests.sendAll(alice, to: "bob", ["a", "b"])
        #expect(await bobLog.wait { log in ids.allSatisfy { id in log.messages.contains { $0.id == id } } })
        let messages = bobLog.messages
        // bob does not send it.
        try await bob.set(.readReceipts(false))
        let stored = cluster.metric("simp_messages_stored_total")
        try await bob.markRead(messages.filter { $0.id == first.id })
        try await bob.set(.readReceipts(true))
        #expect(cluster.metric("simp_messages_stored_total") == stored, "nothing sealed was sent")
        // alice does not take it: the server refuses it as a block would, and bob shows nothing of that.
        try await alice.set(.readReceipts(false))
        try await bob.markRead(messages.filter { $0.id == ids[0] })
        #expect(await waitFor { cluster.metric("simp_messages_sealed_total") == 4 }, "the sealed read was sent")
        try await alice.set(.readReceipts(true))
        try await bob.markRead(messages.filter { $0.id == ids[1] })
        // In alice's inbox order: had either of the first two been told, it would be here first.
        #expect(await aliceLog.wait { !$0.reads.isEmpty })
        #expect(aliceLog.reads.map(\.id) == [ids[1]])
        #expect(bobLog.failed.isEmpty && bobLog.accepted.isEmpty)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// Typings count towards the Update: a user who types long without sending starts the next
    /// text on a new epoch (a receiver opens at most 1,000 generations ahead).
    @Test func typingsCountTowardsTheNextUpdate() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (alice, _, bob, bobLog, _) = try await Self.encryptedPair(cluster, directories)
        // An Update after every 3 sealed messages instead of 1,000 (the first text was one).
        let store = try await alice.identityStore()
        let keys = try ConversationKeys(store: store, user: "alice", device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 3, millis: .max))
        alice.keyring.withLock { $0 = keys }
        let epoch = try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch
        for round in 1...2 {
            try alice.sendTyping(to: "bob")
            #expect(await bobLog.wait { $0.typing.count == round })
        }
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == epoch, "a typing makes no commit")
        let id = try await alice.send(to: "bob", text: "after typing")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == id && $0.text == "after typing" } })
        #expect(try await alice.fetchCommits(in: "bob", fromEpoch: 0).epoch == epoch + 1, "the send made an Update first")
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// Across nodes, the sealed TYPING's MLS message travels in the node notice unchanged.
    @Test func aSealedTypingAndReadCrossNodes() async throws {
        let nodes = try Deployment(nodes: 2)
        defer { nodes.stop() }
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        func encrypting(_ index: Int) -> (inout ClientConfiguration) -> Void {
            { config in
                config.dataDirectory = directories[index]
                config.device = "phone"
                config.directoryCheckInterval = .zero
                config.endToEnd = true
            }
        }
        let alice = try await nodes.connect("alice", startingAt: 0, adjusting: encrypting(0))
        let bob = try await nodes.connect("bob", startingAt: 1, adjusting: encrypting(1))
        #expect(nodes.node(of: alice.client.connectedServer) == 0 && nodes.node(of: bob.client.connectedServer) == 1)
        try await nodes.waitForPresence(of: ["alice", "bob"])
        #expect(try await alice.client.setUpIdentity() == .created)
        #expect(try await bob.client.setUpIdentity() == .created)
        let id = try await alice.client.send(to: "bob", text: "across nodes")
        #expect(await bob.log.wait { $0.messages.contains { $0.id == id && $0.encrypted } })
        try bob.client.sendTyping(to: "alice")
        #expect(await alice.log.wait { $0.typing.map(\.from) == ["bob"] })
        try await bob.client.markRead(bob.log.messages.filter { $0.id == id })
        #expect(await alice.log.wait { $0.reads.map(\.id) == [id] })
        #expect(alice.client.droppedSignals().isEmpty)
        for user in [alice, bob] { await user.client.close() }
    }

    @Test func plainAndForgedReceiptsAndTypingAreDroppedAndCounted() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (alice, aliceLog, bob, bobLog, _) = try await Self.encryptedPair(cluster, directories)
        // A device of bob's that speaks the wire by hand: what a server (or a client that does not
        // encrypt) can make, and alice's device must not take for bob's in their encrypted conversation.
        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("bob", "pw-bob", device: "raw"), device: "raw")
        let id = try await alice.send(to: "bob", text: "read by hand")
        var pushed: Simp_Message?
        while pushed == nil, let datagram = try raw.receiveDatagram() {
            guard datagram.header.kind == .data, let message = try? Simp_Message(serializedBytes: datagram.payload) else { continue }
            if message.messageID == id { pushed = message }
        }
        let message = try #require(pushed)

        // A plain read (the server stores it as a READ notice), a plain typing, a typing and a
        // read whose MLS messages are not the group's.
        let mark = Simp_Envelope(requestID: 31, .markRead(.with { $0.reads = [.with { $0.fromUser = "alice"; $0.messageID = id; $0.seq = message.seq }] }))
        raw.writeRaw(raw.frame(Simp_Envelope(requestID: 30, .receipt(.with { $0.upToSeq = message.seq }))) + raw.frame(mark))
        raw.sendDatagram(.typing, Array("alice".utf8))
        let forged = SealedText.privateMessagePrefix + (0..<90).map { UInt8(truncatingIfNeeded: $0 &* 41) }
        raw.sendDatagram(.typing, Array("alice".utf8) + [0] + forged)
        raw.sendDatagram(.data, try Simp_Message.with {
            $0.version = 1; $0.messageID = "forged-read"; $0.toUser = "alice"; $0.type = .sealedRead
            $0.content = Data(forged).base64EncodedString()
        }.serializedBytes())
        let expected = ["read/unsealed": 1, "typing/unsealed": 1, "typing/unopened": 1, "read/unopened": 1]
        #expect(await aliceLog.wait { _ in alice.droppedSignals() == expected }, "\(alice.droppedSignals())")
        #expect(aliceLog.reads.isEmpty && aliceLog.typing.isEmpty, "none of them shown")
        #expect(!aliceLog.all.contains { if case .undecryptable = $0 { true } else { false } }, "a forged read is not a message")

        // bob's own device, sealed: shown.
        #expect(await bobLog.wait { $0.messages.contains { $0.id == id } })
        try await bob.markRead(bobLog.messages.filter { $0.id == id })
        #expect(await aliceLog.wait { $0.reads.map(\.id) == [id] })
        let delivered = aliceLog.index { if case .delivered(id, _, _) = $0 { true } else { false } }
        let read = aliceLog.index { if case .read(id, _, _) = $0 { true } else { false } }
        #expect(delivered != nil && read != nil && delivered! < read!, "delivered before read")
        try bob.sendTyping(to: "alice")
        #expect(await aliceLog.wait { $0.typing.map(\.from) == ["bob"] })
        #expect(alice.droppedSignals() == expected)
        raw.closeControl()
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func aServerThatRequiresEncryptionRefusesPlainReadsAndTypingBetweenUsers() async throws {
        let cluster = try await TestCluster.start { $0.endToEnd = .required }
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (alice, aliceLog, bob, bobLog, first) = try await Self.encryptedPair(cluster, directories)
        // Sealed: taken.
        try await bob.markRead([first])
        #expect(await aliceLog.wait { $0.reads.map(\.id) == [first.id] })
        try bob.sendTyping(to: "alice")
        #expect(await aliceLog.wait { $0.typing.map(\.from) == ["bob"] })
        // Plain: a one-to-one markRead is E2E_REQUIRED, a plain TYPING dropped and counted.
        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("bob", "pw-bob", device: "raw"), device: "raw")
        let answer = try raw.request(40, .markRead(.with { $0.reads = [.with { $0.fromUser = "alice"; $0.messageID = first.id; $0.seq = first.seq }] }))
        #expect(errorCode(answer) == .e2ERequired)
        raw.sendDatagram(.typing, Array("alice".utf8))
        #expect(await waitFor { cluster.metric("simp_datagrams_dropped_total{reason=\"e2e_required\"}") == 1 })
        #expect(cluster.metric("simp_typing_relayed_total") == 1, "only the sealed one")
        _ = bobLog
        raw.closeControl()
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}
