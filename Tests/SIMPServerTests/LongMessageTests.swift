import Foundation
import NIOCore
import NIOPosix
@_spi(NIO) import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Long messages (docs/PROTOCOL.md, Long messages) against a real server and Redis: a text
/// over one datagram goes as TEXT_PART messages, each stored, pushed, confirmed and resent
/// like any other; the recipient sees one whole message, the sender the events of the whole.
@Suite(.serialized) struct LongMessageTests {
    /// A text of exactly `bytes` UTF-8 bytes mixing 1-, 2-, 3- and 4-byte characters, numbered
    /// as it goes, so that a cut inside a character, a lost or repeated part, or parts put
    /// together out of order all change it.
    static func mixedText(bytes: Int, tag: String) -> String {
        let pieces = ["a", "é", "€", "😀", "ж", " ", "中", "Z", "ß", "𝄞", "ø", "ü", "—", "🎉"]
        var text = "\(tag):"
        var size = text.utf8.count
        var n = 0
        while true {
            let piece = n % 7 == 0 ? "[\(n)]" : pieces[(n * 5 + n / 3) % pieces.count]
            guard size + piece.utf8.count <= bytes else { break }
            text += piece
            size += piece.utf8.count
            n += 1
        }
        return text + String(repeating: ".", count: bytes - size)
    }

    /// How many parts the library sends `text` in, checked against the bounds the cut allows
    /// (at most `partBytes` a part, at least `fullPartBytes` in every part but the last).
    static func expectedParts(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Int {
        let size = text.utf8.count
        let parts = LongText.split(text)
        #expect(parts.joined() == text, sourceLocation: sourceLocation)
        #expect(parts.allSatisfy { $0.utf8.count <= LongText.partBytes }, sourceLocation: sourceLocation)
        let fewest = (size + LongText.partBytes - 1) / LongText.partBytes
        let most = (size + LongText.fullPartBytes - 1) / LongText.fullPartBytes
        #expect((fewest...most).contains(parts.count), "\(parts.count) parts for \(size) bytes", sourceLocation: sourceLocation)
        // A cut every `partBytes` bytes would fall inside a character somewhere: the text tests the cut.
        let utf8 = Array(text.utf8)
        #expect(stride(from: LongText.partBytes, to: size, by: LongText.partBytes).contains { utf8[$0] & 0xC0 == 0x80 },
                "a naive cut would split a character", sourceLocation: sourceLocation)
        return parts.count
    }

    /// No event the application saw names a part ("<id>/<i>/<n>") rather than a message.
    static func partIDs(in log: EventLog) -> [String] {
        log.all.compactMap { event -> String? in
            switch event {
            case .accepted(let id, _, _), .delivered(let id, _, _), .failed(let id, _, _, _), .read(let id, _, _),
                 .groupAccepted(let id, _, _, _), .memberDelivered(let id, _, _, _):
                return LongText.PartID(id) != nil ? id : nil
            case .message(let m):
                return LongText.PartID(m.id) != nil ? m.id : nil
            default:
                return nil
            }
        }
    }

    static func count(_ ids: [String], _ id: String) -> Int { ids.filter { $0 == id }.count }

    // MARK: 1. across 10% random datagram loss both ways

    /// The server and Redis run in a network namespace whose INPUT drops 10% of UDP at random;
    /// the clients run in this process on an event loop whose thread entered the namespace, so
    /// their datagrams to the server and the server's to them cross that loopback (both ways
    /// through INPUT). A 60 KiB text arrives once and whole among carol's short messages.
    @Test(.enabled(if: NetworkNamespace.available, "needs root, iproute2 and iptables for a network namespace"))
    func aLongTextCrossesTenPercentLossWholeAndOnce() async throws {
        let stack = try NamespaceStack()
        defer { withExtendedLifetime(stack) {} }
        try stack.ns.run("iptables", "-A", "INPUT", "-p", "udp", "-m", "statistic", "--mode", "random",
                         "--probability", "0.1", "-j", "DROP")
        let loops = try await NamespacedLoop(stack.ns)
        var config = ClientConfiguration(host: "127.0.0.1", port: stack.server.tcpPort)
        config.reconnectBase = .milliseconds(50)
        config.reconnectCap = .milliseconds(500)
        config.requestTimeout = .seconds(5)
        func connected(_ user: String) async throws -> (SIMPClient, EventLog) {
            let client = SIMPClient(configuration: config, eventLoopGroup: loops.group)
            let log = EventLog(client)
            try await client.register(user: user, password: "pw-\(user)")
            try await client.connect(user: user, password: "pw-\(user)")
            return (client, log)
        }
        let (bob, bobLog) = try await connected("bob")
        let (alice, aliceLog) = try await connected("alice")
        let (carol, carolLog) = try await connected("carol")

        let text = Self.mixedText(bytes: 60 * 1024, tag: "netns")
        let parts = Self.expectedParts(text)
        let start = ContinuousClock.now
        var fromCarol: [String] = []
        for index in 0..<3 { fromCarol.append(try await carol.send(to: "bob", text: "carol before \(index)")) }
        let longID = try await alice.send(to: "bob", text: text)
        for index in 0..<3 { fromCarol.append(try await carol.send(to: "bob", text: "carol after \(index)")) }

        #expect(await bobLog.wait(timeout: .seconds(120)) { $0.messages.contains { $0.id == longID } },
                "the long message arrived; bob has \(bobLog.messages.count) messages")
        let arrived = ContinuousClock.now - start
        #expect(await aliceLog.wait(timeout: .seconds(120)) { $0.delivered.contains(longID) || !$0.failed.isEmpty })
        let delivered = ContinuousClock.now - start
        #expect(await carolLog.wait(timeout: .seconds(120)) { Set($0.delivered).isSuperset(of: fromCarol) || !$0.failed.isEmpty })
        // A later message from alice, through the same loss: once it is in (and confirmed),
        // any repeat of the long message or of its events would have come before it.
        let marker = try await alice.send(to: "bob", text: "marker")
        #expect(await bobLog.wait(timeout: .seconds(60)) { $0.messages.contains { $0.id == marker } })
        #expect(await aliceLog.wait(timeout: .seconds(60)) { $0.delivered.contains(marker) })

        let ids = bobLog.messages.map(\.id)
        #expect(Self.count(ids, longID) == 1, "the long message once")
        let long = bobLog.messages.first { $0.id == longID }
        #expect(long?.text == text, "whole and exact (\(long?.text.utf8.count ?? 0) of \(text.utf8.count) bytes)")
        #expect(long?.parts == parts)
        #expect(long?.from == "alice")
        #expect(bobLog.messages.filter { $0.from == "carol" }.map(\.id) == fromCarol, "carol's six, each once, in order")
        #expect(ids.count == 1 + fromCarol.count + 1, "nothing else reached bob: \(bobLog.messages.map { String($0.text.prefix(20)) })")
        #expect(Self.count(aliceLog.delivered, longID) == 1, "alice told of the delivery once")
        #expect(Self.count(aliceLog.accepted, longID) == 1)
        #expect(aliceLog.failed.isEmpty, "\(aliceLog.failed)")
        #expect(carolLog.failed.isEmpty, "\(carolLog.failed)")
        #expect(Self.partIDs(in: aliceLog).isEmpty && Self.partIDs(in: bobLog).isEmpty)

        let dropped = try droppedByRandomLoss(stack.ns)
        let retransmits = Int(stack.metric("simp_retransmits_total"))
        print("long message, 10% loss both ways: \(text.utf8.count) bytes in \(parts) parts, whole at bob after "
              + "\(arrived), delivered to alice after \(delivered); \(dropped) datagrams dropped, "
              + "server retransmits \(retransmits), stored \(Int(stack.metric("simp_messages_stored_total")))")
        #expect(dropped > 0, "the loss rule dropped datagrams")
        for client in [alice, bob, carol] { await client.close() }
        try await loops.group.shutdownGracefully()
    }

    /// Datagrams the namespace's random-loss rule dropped.
    private func droppedByRandomLoss(_ ns: NetworkNamespace) throws -> Int {
        let p = try ChildProcess("/usr/sbin/ip", ["netns", "exec", ns.name, try findExecutable("iptables").path, "-L", "INPUT", "-v", "-x", "-n"])
        _ = p.waitForExit(timeout: 10)
        let line = p.stdout.split(separator: "\n").first { $0.contains("statistic") }
        return line.flatMap { Int($0.split(separator: " ").first ?? "") } ?? -1
    }

    // MARK: 2. what the server refuses

    private static let recipient = "bob"

    private static func message(_ id: String, _ type: Simp_Message.MessageType, _ text: String, clientSeq: UInt64) throws -> [UInt8] {
        try datagramMessage(id: id, clientSeq: clientSeq, type: type, to: recipient, content: text)
    }

    /// Sends each (id, type, text) in order with client numbers 1, 2, ... and reads the server's
    /// answers until every one has its `failed` or `accepted`.
    private static func answers(_ peer: RawPeer, _ sends: [(String, Simp_Message.MessageType, String)])
        throws -> (failed: [String: Simp_Failed], accepted: [String: Int]) {
        for (index, (id, type, text)) in sends.enumerated() {
            let bytes = try message(id, type, text, clientSeq: UInt64(index + 1))
            #expect(bytes.count <= DatagramHeader.maxPayload, "\(id) fits one datagram")
            peer.sendDatagram(.data, bytes)
        }
        var failed: [String: Simp_Failed] = [:]
        var accepted: [String: Int] = [:]
        while failed.count + accepted.values.reduce(0, +) < sends.count, let envelope = try peer.read() {
            if case .failed(let f) = envelope.body { failed[f.messageID] = f }
            if case .accepted(let a) = envelope.body { accepted[a.messageID, default: 0] += 1 }
        }
        return (failed, accepted)
    }

    /// bob confirms the first two parts of alice's three and a message after them, then his
    /// client is replaced (a new process, the same device): the new one gets only part 3, reads
    /// parts 1 and 2 back from the history, and shows the message whole, once.
    @Test func aClientRestartedBetweenPartsStillShowsTheMessageWhole() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("alice")
        try await cluster.register(Self.recipient)
        var config = cluster.clientConfiguration()
        config.device = "phone"
        let bob = SIMPClient(configuration: config)
        let bobLog = EventLog(bob)
        try await bob.connect(user: Self.recipient, password: "pw-\(Self.recipient)")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("alice", "pw-alice"))

        let parts = [Self.mixedText(bytes: 960, tag: "r1"), Self.mixedText(bytes: 958, tag: "r2"), "the end"]
        let sends: [(String, Simp_Message.MessageType, String)] = [
            ("r/1/3", .textPart, parts[0]), ("r/2/3", .textPart, parts[1]), ("mid", .text, "in the middle"),
            ("r/3/3", .textPart, parts[2]), ("after", .text, "after it"),
        ]
        func send(_ index: Int) throws {
            let (id, type, text) = sends[index]
            peer.sendDatagram(.data, try Self.message(id, type, text, clientSeq: UInt64(index + 1)))
        }
        /// Reads alice's notices until `id` was delivered.
        func delivered(_ id: String) throws -> Bool {
            while let envelope = try peer.read() {
                if case .delivered(let d) = envelope.body, d.messageID == id { return true }
            }
            return false
        }
        for index in 0..<3 { try send(index) }
        #expect(try delivered("mid"), "bob confirmed the two parts and the message after them")
        // Events reach the log in order, so parts shown would come before "mid".
        #expect(await bobLog.wait { $0.messages.contains { $0.id == "mid" } })
        #expect(bobLog.messages.map(\.id) == ["mid"], "the parts are held, not shown")
        await bob.close()

        let again = SIMPClient(configuration: config)
        let againLog = EventLog(again)
        try await again.connect(user: Self.recipient, password: "pw-\(Self.recipient)")
        for index in 3..<5 { try send(index) }
        #expect(await againLog.wait(timeout: .seconds(10)) { $0.messages.count >= 2 })
        #expect(Set(againLog.messages.map(\.id)) == ["r", "after"], "\(againLog.messages.map(\.id))")
        let whole = againLog.messages.first { $0.id == "r" }
        #expect(whole?.text == parts.joined())
        #expect(whole?.parts == 3)
        #expect(try delivered("r/3/3"))
        await again.close()
        await cluster.stop()
    }

    /// With `--max-message-bytes 5000` (6 parts at most): a part with a malformed id is a bad
    /// request, one of more parts than the limit allows too large, one of 961 bytes (or none,
    /// or under 957 when it is not the last) a bad request, a last part that must end past the
    /// limit too large; a message of exactly 6 parts is taken and shown whole, and the message
    /// after the refusals is not held up by their numbers.
    @Test func theServerRefusesMalformedAndOversizedParts() async throws {
        let cluster = try await TestCluster.start { $0.limits.maxMessageBytes = 5_000 }
        #expect(LongText.maxParts(forMaxBytes: 5_000) == 6)
        try await cluster.register("alice")
        let (bob, bobLog) = try await cluster.connectedClient(Self.recipient)
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("alice", "pw-alice"))
        #expect(peer.session?.maxMessageBytes == 5_000, "the limit is told at connect")

        let malformed = ["abc", "x/0/2", "x/3/2", "x/1/1", "/1/2", "x/a/2", "x/1/", "x//2", "x/1/-2"]
        // Six parts, the first exactly `partBytes` long, the others of other sizes: five of
        // at least 957 bytes and a last that ends within the limit (5 * 957 + 4 <= 5,000).
        let sixParts = [Self.mixedText(bytes: LongText.partBytes, tag: "p1"), Self.mixedText(bytes: 957, tag: "p2"),
                        Self.mixedText(bytes: 958, tag: "p3"), Self.mixedText(bytes: 959, tag: "p4"),
                        Self.mixedText(bytes: 957, tag: "p5"), "𝄞"]
        #expect(sixParts.map(\.utf8.count) == [LongText.partBytes, 957, 958, 959, 957, 4])
        let six = sixParts.joined()
        let full = String(repeating: "y", count: LongText.partBytes + 1)
        var sends: [(String, Simp_Message.MessageType, String)] = malformed.map { ($0, .textPart, "part") }
        sends += [("seven/1/7", .textPart, "one of seven"), ("fat/1/2", .textPart, full), ("empty/1/2", .textPart, ""),
                  ("short/1/2", .textPart, "z"), ("over/6/6", .textPart, String(repeating: "o", count: 216))]
        sends += sixParts.enumerated().map { ("six/\($0.offset + 1)/6", .textPart, $0.element) }
        sends += [("after", .text, "after the refusals")]
        let (failed, accepted) = try Self.answers(peer, sends)

        for id in malformed {
            #expect(failed[id]?.code == .badRequest, "\(id): \(String(describing: failed[id]))")
        }
        #expect(failed["seven/1/7"]?.code == .messageTooLarge, "\(String(describing: failed["seven/1/7"]))")
        #expect(failed["seven/1/7"]?.reason.contains("at most 6 parts") == true, "\(failed["seven/1/7"]?.reason ?? "")")
        #expect(failed["fat/1/2"]?.code == .badRequest, "\(String(describing: failed["fat/1/2"]))")
        #expect(failed["fat/1/2"]?.reason.contains("not 961") == true, "\(failed["fat/1/2"]?.reason ?? "")")
        #expect(failed["empty/1/2"]?.code == .badRequest, "\(String(describing: failed["empty/1/2"]))")
        #expect(failed["short/1/2"]?.code == .badRequest, "\(String(describing: failed["short/1/2"]))")
        #expect(failed["over/6/6"]?.code == .messageTooLarge, "\(String(describing: failed["over/6/6"]))")
        #expect(failed.count == malformed.count + 5, "only those refused: \(failed.keys.sorted())")
        let takenIDs = (1...6).map { "six/\($0)/6" } + ["after"]
        #expect(accepted == Dictionary(uniqueKeysWithValues: takenIDs.map { ($0, 1) }), "\(accepted)")

        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.messages.contains { $0.id == "after" } })
        #expect(bobLog.messages.map(\.id) == ["six", "after"], "the six parts shown as one, then the message after")
        #expect(bobLog.messages.first?.text == six)
        #expect(bobLog.messages.first?.parts == 6)
        #expect(cluster.metric("simp_messages_stored_total") == 7, "six parts and the message after, nothing refused")
        await bob.close()
        await cluster.stop()
    }

    /// With `--max-message-bytes 500`: a TEXT of 600 bytes fits a datagram but is over the
    /// limit, so it is too large; so is any long message (a part but the last holds at least
    /// 957 bytes, over the limit alone); a TEXT of exactly 500 bytes and the message after are
    /// taken, not held up.
    @Test func theServerRefusesATextOverItsLimitThatFitsADatagram() async throws {
        let cluster = try await TestCluster.start { $0.limits.maxMessageBytes = 500 }
        try await cluster.register("alice")
        let (bob, bobLog) = try await cluster.connectedClient(Self.recipient)
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("alice", "pw-alice"))
        #expect(peer.session?.maxMessageBytes == 500)

        let over = Self.mixedText(bytes: 600, tag: "over")
        let limit = Self.mixedText(bytes: 500, tag: "limit")
        let (failed, accepted) = try Self.answers(peer, [
            ("over", .text, over), ("three/1/3", .textPart, "one of three"), ("two/2/2", .textPart, "end of two"),
            ("limit", .text, limit), ("after", .text, "after"),
        ])
        #expect(failed["over"]?.code == .messageTooLarge, "\(String(describing: failed["over"]))")
        #expect(failed["over"]?.reason == "text of 600 bytes is over the limit of 500", "\(failed["over"]?.reason ?? "")")
        #expect(failed["three/1/3"]?.code == .messageTooLarge, "\(String(describing: failed["three/1/3"]))")
        #expect(failed["two/2/2"]?.code == .messageTooLarge, "\(String(describing: failed["two/2/2"]))")
        #expect(failed.count == 3)
        #expect(accepted == ["limit": 1, "after": 1], "\(accepted)")
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.messages.contains { $0.id == "after" } })
        #expect(bobLog.messages.map(\.id) == ["limit", "after"])
        #expect(bobLog.messages.first?.text == limit)
        #expect(cluster.metric("simp_messages_stored_total") == 2)
        await bob.close()
        await cluster.stop()
    }

    // MARK: 3. groups

    @Test func aLongMessageToAGroupArrivesWholeAndOnceAtEachMember() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        let (alice, aliceLog) = try await cluster.connectedDevice("alice", "main")
        let (bob, bobLog) = try await cluster.connectedDevice("bob", "main")
        let (carol, carolLog) = try await cluster.connectedDevice("carol", "main")
        try cluster.letAnyoneAdd(["bob", "carol"])
        _ = try await alice.createGroup("long", members: ["bob", "carol"])
        let text = Self.mixedText(bytes: 20_000, tag: "group")
        let parts = Self.expectedParts(text)

        let before = try await alice.send(to: "#long", text: "before")
        let longID = try await alice.send(to: "#long", text: text)
        let after = try await alice.send(to: "#long", text: "after")
        for log in [bobLog, carolLog] {
            #expect(await log.wait { $0.groupMessages("long").contains { $0.id == after } })
        }
        #expect(await aliceLog.wait { $0.groupAccepted.contains { $0.id == after } })
        #expect(await aliceLog.wait { $0.memberDeliveries.filter { $0.id == after }.count == 2 })

        for log in [bobLog, carolLog] {
            let seen = log.groupMessages("long")
            #expect(seen.map(\.id) == [before, longID, after], "each once, in order")
            let long = seen.first { $0.id == longID }
            #expect(long?.text == text)
            #expect(long?.parts == parts)
            #expect(long?.from == "alice")
            #expect(Self.partIDs(in: log).isEmpty)
        }
        let accepted = aliceLog.groupAccepted.filter { $0.id == longID }
        #expect(accepted.count == 1, "\(aliceLog.groupAccepted)")
        #expect(accepted.first?.recipients == 2)
        #expect(aliceLog.memberDeliveries.filter { $0.id == longID }.map(\.member).sorted() == ["bob", "carol"],
                "\(aliceLog.memberDeliveries)")
        #expect(aliceLog.failed.isEmpty, "\(aliceLog.failed)")
        #expect(Self.partIDs(in: aliceLog).isEmpty, "\(Self.partIDs(in: aliceLog))")
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    // MARK: 4. read receipts

    @Test func aReadLongMessageIsReadOnceAfterItsDelivery() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let text = Self.mixedText(bytes: 10_000, tag: "read")
        let parts = Self.expectedParts(text)
        let longID = try await alice.send(to: "bob", text: text)
        #expect(await bobLog.wait { $0.messages.contains { $0.id == longID } })
        let long = try #require(bobLog.messages.first { $0.id == longID })
        #expect(long.parts == parts && long.text == text)
        try await bob.markRead([long])
        #expect(await aliceLog.wait { $0.reads.contains { $0.id == longID } }, "\(aliceLog.reads)")

        // A later short message, read too: once alice hears of it, any repeat came before.
        let later = try await alice.send(to: "bob", text: "later")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == later } })
        try await bob.markRead(bobLog.messages.filter { $0.id == later })
        #expect(await aliceLog.wait { $0.reads.contains { $0.id == later } })

        #expect(aliceLog.reads.map(\.id) == [longID, later], "each read once: \(aliceLog.reads)")
        #expect(aliceLog.reads.allSatisfy { $0.by == "bob" })
        let deliveredAt = aliceLog.index { if case .delivered(longID, _, _) = $0 { true } else { false } }
        let readAt = aliceLog.index { if case .read(longID, _, _) = $0 { true } else { false } }
        #expect(deliveredAt != nil && readAt != nil && deliveredAt! < readAt!, "delivered before read")
        #expect(Self.count(aliceLog.delivered, longID) == 1)
        #expect(Self.partIDs(in: aliceLog).isEmpty, "\(Self.partIDs(in: aliceLog))")
        #expect(bobLog.reads.isEmpty)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    // MARK: 5. failure

    /// bob takes messages from contacts only: every part of alice's long text is refused, and
    /// she hears of it once, for the message; nothing is stored or shown for bob.
    @Test func aRefusedLongMessageFailsOnceForTheWhole() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        #expect(try await bob.set(.contactsOnly(true)).contactsOnly == true)
        let text = Self.mixedText(bytes: 8_000, tag: "refused")
        let parts = Self.expectedParts(text)

        let longID = try await alice.send(to: "bob", text: text)
        #expect(await aliceLog.wait { $0.failed.contains { $0.id == longID } }, "\(aliceLog.failed)")
        // Every part settled (refused): no later failure can come.
        #expect(await eventually { await alice.outstandingCount() == 0 })
        let failures = aliceLog.failed
        #expect(failures.count == 1, "one failure for the message: \(failures)")
        #expect(failures.first?.id == longID)
        let reason = failures.first?.reason ?? ""
        #expect(reason.contains("bob does not take messages from you"), "\(reason)")
        #expect(reason.hasPrefix("part ") && reason.contains(" of \(parts): "), "names the part: \(reason)")
        #expect(!aliceLog.accepted.contains(longID) && !aliceLog.delivered.contains(longID))
        #expect(Self.partIDs(in: aliceLog).isEmpty, "\(Self.partIDs(in: aliceLog))")
        #expect(cluster.metric("simp_messages_stored_total") == 0, "no part stored")

        // Open again: the next message is the first thing bob sees.
        try await bob.set(.contactsOnly(false))
        let open = try await alice.send(to: "bob", text: "open again")
        #expect(await bobLog.wait { $0.messages.contains { $0.id == open } })
        #expect(bobLog.messages.map(\.id) == [open], "nothing of the refused message")
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    // MARK: 6. history

    @Test func historyShowsTheLongMessageWholeAmongShortOnes() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let text = Self.mixedText(bytes: 30_000, tag: "history")
        let parts = Self.expectedParts(text)
        var texts = (0..<3).map { "before \($0)" }
        texts.append(text)
        texts += (0..<3).map { "after \($0)" }
        var ids: [String] = []
        for each in texts { ids.append(try await alice.send(to: "bob", text: each)) }
        #expect(await bobLog.wait { $0.messages.map(\.id) == ids })
        #expect(await aliceLog.wait { Set($0.delivered).isSuperset(of: ids) })

        // The default limit (20) is less than the parts: the message is joined across pages.
        let history = try await bob.history(with: "alice")
        #expect(history.map(\.id) == ids, "\(history.map { String($0.text.prefix(12)) })")
        #expect(history.map(\.text) == texts)
        #expect(history.map(\.parts) == [1, 1, 1, parts, 1, 1, 1])
        let sendersView = try await alice.history(with: "bob")
        #expect(sendersView.map(\.id) == ids)
        #expect(sendersView.map(\.text) == texts)
        // The last four: the long message counts as one.
        let lastFour = try await bob.history(with: "alice", limit: 4)
        #expect(lastFour.map(\.id) == Array(ids.suffix(4)))
        #expect(lastFour.first?.text == text)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}

/// An event loop whose one thread entered a network namespace before anything ran on it: a
/// client on it opens its sockets there (NIO makes them on the loop), so it reaches a server
/// on the namespace's loopback while the test runs in this process.
final class NamespacedLoop: Sendable {
    let group: MultiThreadedEventLoopGroup

    /// glibc's setns(2) (Swift's Glibc module leaves it out) and CLONE_NEWNET.
    private typealias SetNS = @convention(c) (Int32, Int32) -> Int32
    private static var setns: SetNS? {
        dlsym(dlopen(nil, RTLD_NOW), "setns").map { unsafeBitCast($0, to: SetNS.self) }
    }
    private static let newNet: Int32 = 0x4000_0000

    init(_ ns: NetworkNamespace) async throws {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let path = "/var/run/netns/\(ns.name)"
        let entered: Result<Void, TestSupportError> = try await group.next().submit {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { return .failure(TestSupportError("cannot open \(path): errno \(errno)")) }
            defer { close(fd) }
            guard let setns = Self.setns, setns(fd, Self.newNet) == 0 else { return .failure(TestSupportError("setns \(path): errno \(errno)")) }
            // The thread's namespace is now the one the path names.
            var mine = stat()
            var theirs = stat()
            guard stat("/proc/thread-self/ns/net", &mine) == 0, stat(path, &theirs) == 0, mine.st_ino == theirs.st_ino else {
                return .failure(TestSupportError("the loop's thread is not in \(path)"))
            }
            return .success(())
        }.get()
        do {
            try entered.get()
        } catch {
            try await group.shutdownGracefully()
            throw error
        }
    }
}
