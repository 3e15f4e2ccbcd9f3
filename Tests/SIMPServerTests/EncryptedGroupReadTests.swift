import Foundation
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A group's read receipts sealed (docs/E2EE.md, Part 7, "Groups: a targeted sealed read")
/// against a real server and Redis: a member's read of a group message goes sealed in the
/// group's MLS group to that message's sender alone (`SEALED_READ` to `SENDER#NAME`), never in
/// the clear, never to the other members; an encrypting device drops a plain group READ and a
/// sealed read naming a message of another conversation; reads count towards the reader's
/// next Update; `--e2e required` refuses a plain group `markRead`.
@Suite(.serialized) struct EncryptedGroupReadTests {
    typealias People = EncryptedGroupTests
    typealias E2E = EncryptedConversationTests

    @Test func aGroupReadGoesSealedToItsSenderAloneAndIsApplied() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        var (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let fromBob = try await bob.client.send(to: "#trio", text: "bob's, to be read")
        let fromCarol = try await carol.client.send(to: "#trio", text: "carol's, to be read")
        #expect(await People.reads(phone, fromBob, "bob's, to be read"))
        #expect(await People.reads(phone, fromCarol, "carol's, to be read"))
        #expect(await People.reads(laptop, fromCarol, "carol's, to be read"))

        // bob and carol away: what alice's reads leave stays in their inboxes, where a dump sees it.
        await bob.client.close()
        await carol.client.close()
        let sealedBefore = cluster.metric("simp_messages_sealed_total")
        let before = try E2E.everythingInRedis(cluster)
        try await phone.client.markRead(phone.log.messages.filter { [fromBob, fromCarol].contains($0.id) })
        #expect(await waitFor { cluster.metric("simp_messages_sealed_total") == sealedBefore + 2 }, "one sealed read per sender")
        // alice's laptop hears what she read (read elsewhere); her phone's application nothing of what it sent.
        #expect(await laptop.log.wait { Set($0.reads.map(\.id)) == [fromBob, fromCarol] }, "\(laptop.log.reads)")
        #expect(laptop.log.reads.allSatisfy { $0.by == "alice" })
        #expect(phone.log.accepted.isEmpty && phone.log.failed.isEmpty, "the sealed reads were silent")
        let after = try E2E.everythingInRedis(cluster)
        for id in [fromBob, fromCarol] {
            #expect(EncryptedSignalsTests.occurrences(of: id, in: after) == EncryptedSignalsTests.occurrences(of: id, in: before),
                    "\(id) was told in the clear")
        }

        // Back: each sender hears alice's read of its own message, and of nothing else.
        let bobAgain = try await E2E.connected(cluster, "bob", directories[1])
        let carolAgain = try await E2E.connected(cluster, "carol", directories[3])
        bob = (bobAgain.0, bobAgain.1)
        carol = (carolAgain.0, carolAgain.1)
        #expect(await bob.log.wait { $0.reads.map(\.id) == [fromBob] }, "\(bob.log.reads)")
        #expect(await carol.log.wait { $0.reads.map(\.id) == [fromCarol] }, "\(carol.log.reads)")
        #expect(bob.log.reads.allSatisfy { $0.by == "alice" } && carol.log.reads.allSatisfy { $0.by == "alice" })

        // The generations alice's reads used are a gap for every other member: her next text opens.
        let next = try await phone.client.send(to: "#trio", text: "alice writes after reading")
        for device in [laptop, bob, carol] { #expect(await People.reads(device, next, "alice writes after reading")) }
        for device in [phone, laptop, bob, carol] {
            #expect(device.client.droppedSignals().isEmpty, "\(device.client.droppedSignals())")
            #expect(device.client.decryptionFailures().isEmpty)
        }
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// Why a group's read is opened on a copy: bob's copies of the group are held (his bound of
    /// unconfirmed group copies is reached while he is away), so alice's read of his message,
    /// stored in his inbox, comes before her text sealed 41 generations earlier, with 40 reads
    /// to carol in between. Taken on the real state, the read would leave that text's key
    /// dropped (32 skipped keys kept); opened on a copy, the text opens.
    @Test func aReadThatOvertakesAnEarlierTextLeavesItOpenable() async throws {
        let cluster = try await TestCluster.start { $0.inboxLimit = 20 }
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        var (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let fromBob = try await bob.client.send(to: "#trio", text: "bob's first")
        let fromCarol = try await carol.client.send(to: "#trio", text: "carol's first")
        for id in [fromBob, fromCarol] { #expect(await phone.log.wait { $0.messages.contains { $0.id == id && $0.encrypted } }) }
        #expect(await bob.log.wait { $0.messages.contains { $0.id == fromCarol && $0.encrypted } })
        await bob.client.close()
        for index in 0..<25 { _ = try await carol.client.send(to: "#trio", text: "carol fills bob's copies \(index)") }
        #expect(await waitFor { cluster.metric("simp_group_copies_held_total") >= 1 }, "bob's copies of the group are held")
        let text = try await phone.client.send(to: "#trio", text: "alice's text, before her reads")
        #expect(await People.reads(laptop, text, "alice's text, before her reads"))
        let sealed = cluster.metric("simp_messages_sealed_total")
        let carols = try #require(phone.log.messages.first { $0.id == fromCarol })
        for _ in 0..<40 { try await phone.client.markRead([carols]) }
        try await phone.client.markRead(phone.log.messages.filter { $0.id == fromBob })
        #expect(await waitFor { cluster.metric("simp_messages_sealed_total") == sealed + 41 }, "41 sealed reads")

        let again = try await E2E.connected(cluster, "bob", directories[1])
        bob = (again.0, again.1)
        #expect(await bob.log.wait { $0.reads.map(\.id) == [fromBob] }, "\(bob.log.reads)")
        #expect(await People.reads(bob, text, "alice's text, before her reads"))
        #expect(bob.client.decryptionFailures().isEmpty, "\(bob.client.decryptionFailures())")
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// What the server (or a client that does not encrypt) can make of a group's read, and what a
    /// member could seal that its reader could not have made: dropped and counted, never shown.
    @Test func plainGroupReadsAndReadsOfAnotherConversationAreDroppedAndCounted() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let id = try await bob.client.send(to: "#trio", text: "read by hand")
        #expect(await People.reads(phone, id, "read by hand"))
        let groupMessage = try #require(phone.log.messages.first { $0.id == id })

        // A device of alice's that speaks the wire by hand: a plain markRead of the group mark
        // (the server stores a plain READ naming #trio in bob's inbox).
        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("alice", "pw-alice", device: "raw"), device: "raw")
        let mark = Simp_ReadMark.with {
            $0.fromUser = "bob"; $0.messageID = id; $0.seq = groupMessage.seq; $0.group = "trio"; $0.groupSeq = groupMessage.groupSeq
        }
        raw.writeRaw(raw.frame(Simp_Envelope(requestID: 30, .receipt(.with { $0.upToSeq = groupMessage.seq })))
                     + raw.frame(Simp_Envelope(requestID: 31, .markRead(.with { $0.reads = [mark] }))))
        #expect(await bob.log.wait { _ in bob.client.droppedSignals() == ["read/unsealed": 1] }, "\(bob.client.droppedSignals())")
        #expect(bob.log.reads.isEmpty, "a plain group read is not shown")

        // alice's phone seals, in the group, a read of bob's one-to-one message to her: one she
        // could not have read in #trio. bob's device knows where that message went.
        let direct = try await bob.client.send(to: "alice", text: "one to one")
        #expect(await phone.log.wait { $0.messages.contains { $0.id == direct && $0.encrypted } })
        var moved = try #require(phone.log.messages.first { $0.id == direct })
        moved.group = "trio"
        moved.groupSeq = groupMessage.groupSeq
        try await phone.client.markRead([moved])
        #expect(await bob.log.wait { _ in bob.client.droppedSignals() == ["read/unsealed": 1, "read/unopened": 1] },
                "\(bob.client.droppedSignals())")
        #expect(bob.log.reads.isEmpty)

        // The real read: shown, after its delivered.
        try await phone.client.markRead([groupMessage])
        #expect(await bob.log.wait { $0.reads.map(\.id) == [id] }, "\(bob.log.reads)")
        #expect(bob.client.decryptionFailures().isEmpty && carol.client.droppedSignals().isEmpty)
        raw.closeControl()
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// A read uses a generation of the reader's sending keys like a text, so it counts towards
    /// the reader's next Update: many reads and no text still start the next text on a new epoch.
    @Test func groupReadsCountTowardsTheReadersNextUpdate() async throws {
        let cluster = try await TestCluster.start()
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let ids = [try await bob.client.send(to: "#trio", text: "one"), try await bob.client.send(to: "#trio", text: "two")]
        let first = try await phone.client.send(to: "#trio", text: "alice's first, sealed message 1")
        #expect(await People.reads(bob, first, "alice's first, sealed message 1"))
        for id in ids { #expect(await phone.log.wait { $0.messages.contains { $0.id == id && $0.encrypted } }) }
        // An Update after every 3 sealed messages instead of 1,000.
        let store = try await phone.client.identityStore()
        let keys = try ConversationKeys(store: store, user: "alice", device: "phone", keys: try #require(try store.ownKeys()),
                                        checkInterval: .zero, updateAfter: (messages: 3, millis: .max))
        phone.client.keyring.withLock { $0 = keys }
        let epoch = try await phone.client.fetchCommits(in: "#trio", fromEpoch: 0).epoch
        for (round, id) in ids.enumerated() {
            try await phone.client.markRead(phone.log.messages.filter { $0.id == id })
            #expect(await bob.log.wait { $0.reads.count == round + 1 })
        }
        #expect(try await phone.client.fetchCommits(in: "#trio", fromEpoch: 0).epoch == epoch, "a read makes no commit while none is due")
        let after = try await phone.client.send(to: "#trio", text: "after two reads")
        for device in [laptop, bob, carol] { #expect(await People.reads(device, after, "after two reads")) }
        #expect(try await phone.client.fetchCommits(in: "#trio", fromEpoch: 0).epoch == epoch + 1,
                "the text and the two reads are 3: the send made an Update first")
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    @Test func aServerThatRequiresEncryptionRefusesAPlainGroupMarkRead() async throws {
        let cluster = try await TestCluster.start { $0.endToEnd = .required }
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let id = try await bob.client.send(to: "#trio", text: "sealed, as everything here")
        #expect(await People.reads(phone, id, "sealed, as everything here"))
        let message = try #require(phone.log.messages.first { $0.id == id })
        // Sealed: taken.
        try await phone.client.markRead([message])
        #expect(await bob.log.wait { $0.reads.map(\.id) == [id] })
        // Plain: E2E_REQUIRED, nothing told.
        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("alice", "pw-alice", device: "raw"), device: "raw")
        let answer = try raw.request(40, .markRead(.with { $0.reads = [.with {
            $0.fromUser = "bob"; $0.messageID = id; $0.seq = message.seq; $0.group = "trio"; $0.groupSeq = message.groupSeq
        }] }))
        #expect(errorCode(answer) == .e2ERequired)
        raw.closeControl()
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// A group's sealed read from someone who is not in the group is refused NOT_A_MEMBER before
    /// it is stored, the same whether the named sender is in the group or the group exists: it
    /// never reaches the sender's inbox (despite contacts-only), and its answer tells nothing of
    /// who is a member (docs/SECURITY.md, read receipts).
    @Test func aGroupReadFromSomeoneOutsideTheGroupIsRefusedAndNeverStored() async throws {
        let cluster = try await TestCluster.start { $0.endToEnd = .required }
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.set(.contactsOnly(true))
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let id = try await bob.client.send(to: "#trio", text: "for the trio only")
        #expect(await People.reads(phone, id, "for the trio only"))

        try await cluster.register("mallory")
        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("mallory", "pw-mallory", device: "raw"), device: "raw")
        let forged = SealedText.privateMessagePrefix + (0..<90).map { UInt8(truncatingIfNeeded: $0 &* 37) }
        for (index, address) in ["bob#trio", "dave#trio", "bob#nosuchgroup"].enumerated() {
            raw.sendDatagram(.data, try Simp_Message.with {
                $0.version = 1; $0.messageID = "stranger-read-\(index)"; $0.toUser = address; $0.type = .sealedRead
                $0.content = Data(forged).base64EncodedString()
            }.serializedBytes())
            var answer: Simp_Envelope.OneOf_Body?
            while answer == nil, let envelope = try raw.read() {
                if case .failed = envelope.body { answer = envelope.body }
                if case .accepted = envelope.body { answer = envelope.body }
            }
            guard case .failed(let failed)? = answer else {
                Issue.record("\(address): \(String(describing: answer))")
                continue
            }
            #expect(failed.code == .notAMember && failed.messageID == "stranger-read-\(index)", "\(address): \(failed)")
        }
        #expect(cluster.metric("simp_group_reads_refused_total") == 3)

        // A member's read after them reaches bob; none of the stranger's did (bob's device would
        // have dropped and counted it, unopenable).
        let message = try #require(phone.log.messages.first { $0.id == id })
        try await phone.client.markRead([message])
        #expect(await bob.log.wait { $0.reads.map(\.id) == [id] })
        #expect(bob.client.droppedSignals().isEmpty, "\(bob.client.droppedSignals())")
        raw.closeControl()
        for device in [phone, laptop, bob, carol] { await device.client.close() }
        await cluster.stop()
    }

    /// A member removed while the group's copies to it are held (it stopped confirming, and
    /// its bound of unconfirmed group copies was reached) has not been told of its removal, and
    /// by how far the copies reached it is still in: its reads are refused all the same, by
    /// the group's own members record.
    @Test func aRemovedMemberWhoseCopiesAreHeldCannotSendReads() async throws {
        let cluster = try await TestCluster.start { $0.inboxLimit = 20 }
        let directories = (0..<5).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        let (phone, laptop, bob, carol) = try await People.people(cluster, directories)
        _ = try await bob.client.createGroup("trio", members: ["alice", "carol"])
        let first = try await bob.client.send(to: "#trio", text: "before carol goes away")
        #expect(await People.reads(carol, first, "before carol goes away"))
        await carol.client.close()
        for index in 0..<25 { _ = try await bob.client.send(to: "#trio", text: "bob fills carol's copies \(index)") }
        #expect(await waitFor { cluster.metric("simp_group_copies_held_total") >= 1 }, "carol's copies of the group are held")
        _ = try await bob.client.removeFromGroup("trio", ["carol"])

        let raw = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try raw.connectAndBind(token: try raw.login("carol", "pw-carol", device: "raw"), device: "raw")
        let forged = SealedText.privateMessagePrefix + (0..<90).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        raw.sendDatagram(.data, try Simp_Message.with {
            $0.version = 1; $0.messageID = "removed-read"; $0.toUser = "bob#trio"; $0.type = .sealedRead
            $0.content = Data(forged).base64EncodedString()
        }.serializedBytes())
        var answer: Simp_Envelope.OneOf_Body?
        while answer == nil, let envelope = try raw.read() {
            if case .failed(let failed) = envelope.body, failed.messageID == "removed-read" { answer = envelope.body }
            if case .accepted(let accepted) = envelope.body, accepted.messageID == "removed-read" { answer = envelope.body }
        }
        guard case .failed(let failed)? = answer else {
            Issue.record("not refused: \(String(describing: answer))")
            return
        }
        #expect(failed.code == .notAMember, "\(failed)")
        raw.closeControl()
        for device in [phone, laptop, bob] { await device.client.close() }
        await cluster.stop()
    }
}
