import Foundation
import SIMPCore
import Testing
@testable import SIMPClient

/// Each sent message's status from the events about it (`StatusBook`), the local history's
/// policy (`HistoryEntry`), the library's error codes, and the engine's status actions.
@Suite struct MessageStatusTests {
    /// Without the history, only what a handle follows is kept; once final it is let go.
    @Test func onlyTrackedMessagesAreKeptWithoutTheHistory() {
        var book = StatusBook()
        #expect(book.apply(.accepted(id: "m1", to: "bob", seq: 5), user: "alice", everyMessage: false) == nil)
        book.track("m2")
        #expect(book.apply(.accepted(id: "m2", to: "bob", seq: 6), user: "alice", everyMessage: false)?.stage == .accepted)
        #expect(book.apply(.read(id: "m2", from: "alice", by: "bob"), user: "alice", everyMessage: false)?.stage == .read)
        #expect(book.apply(.failed(id: "m2", to: "bob", reason: "late"), user: "alice", everyMessage: false) == nil,
                "final: no longer followed")
        #expect(book.apply(.accepted(id: "m1", to: "bob", seq: 5), user: "alice")?.stage == .accepted, "every message with the history")
    }

    @Test func aOneToOneMessageGoesForwardOnlyAndIsToldOncePerChange() {
        var book = StatusBook()
        let accepted = book.apply(.accepted(id: "m1", to: "bob", seq: 5), user: "alice")
        #expect(accepted?.stage == .accepted && accepted?.seq == 5)
        #expect(book.apply(.accepted(id: "m1", to: "bob", seq: 5), user: "alice") == nil, "a repeat changes nothing")
        #expect(book.apply(.delivered(id: "m1", to: "bob", seq: 5), user: "alice")?.stage == .delivered)
        #expect(book.apply(.accepted(id: "m1", to: "bob", seq: 5), user: "alice") == nil, "never backwards")
        #expect(book.apply(.failed(id: "m1", to: "bob", reason: "late", code: .storeUnavailable), user: "alice") == nil,
                "an accepted message does not fail")
        let read = book.apply(.read(id: "m1", from: "alice", by: "bob"), user: "alice")
        #expect(read?.stage == .read && read?.isFinal == true && read?.isSettled == true)
        #expect(book.apply(.read(id: "x", from: "carol", by: "alice"), user: "alice") == nil,
                "the user's own read on another device is no status of a sent message")
        #expect(book.apply(.message(IncomingMessage(Simp_Message())), user: "alice") == nil)
    }

    @Test func aFailureCarriesTheLibrarysCode() {
        var book = StatusBook()
        let failed = book.apply(.failed(id: "m1", to: "bob", reason: "no such user", code: .unknownUser), user: "alice")
        #expect(failed?.stage == .failed && failed?.failure == .init(code: .unknownUser, reason: "no such user"))
        let gaveUp = book.apply(.failed(id: "m2", to: "bob", reason: "client disconnected", code: nil), user: "alice")
        #expect(gaveUp?.failure?.code == .gaveUp)
        #expect(ErrorCode(Simp_ErrorCode.notAContact) == .notAContact)
        #expect(ErrorCode(nil) == .unspecified)
        #expect(ClientError("refused", code: .inboxFull).errorCode == .inboxFull)
        for code in Simp_ErrorCode.allCases where code != .errorUnspecified {
            #expect(ErrorCode(code) != .unspecified, "\(code) has a code of the library's")
            #expect(ErrorCode(code).protocolName == code.protocolName, "\(code) keeps its name for scripts")
        }
        #expect(ErrorCode.gaveUp.protocolName == nil)
    }

    @Test func aGroupsMemberReceiptsCombineIntoOneStage() {
        var book = StatusBook()
        // bob confirms before the sender hears `groupAccepted` (which waits for every copy).
        let early = book.apply(.memberDelivered(id: "g1", to: "#crew", member: "bob", seq: 7), user: "alice")
        #expect(early?.stage == .sending && early?.members == ["bob": .delivered])
        let accepted = book.apply(.groupAccepted(id: "g1", to: "#crew", seq: 7, recipients: 2), user: "alice")
        #expect(accepted?.stage == .accepted && accepted?.recipients == 2 && accepted?.isGroup == true)
        #expect(book.apply(.memberDelivered(id: "g1", to: "#crew", member: "bob", seq: 7), user: "alice") == nil, "bob's second device")
        let both = book.apply(.memberDelivered(id: "g1", to: "#crew", member: "carol", seq: 7), user: "alice")
        #expect(both?.stage == .delivered && both?.isSettled == true && both?.isFinal == false)
        let oneRead = book.apply(.read(id: "g1", from: "alice", by: "carol"), user: "alice")
        #expect(oneRead?.stage == .delivered && oneRead?.members == ["bob": .delivered, "carol": .read])
        let allRead = book.apply(.read(id: "g1", from: "alice", by: "bob"), user: "alice")
        #expect(allRead?.stage == .read && allRead?.isFinal == true)
        #expect(allRead?.storedMembers == "bob=read carol=read")
        var restored = MessageStatus(id: "g1", to: "#crew")
        restored.restoreMembers(allRead?.storedMembers ?? "")
        #expect(restored.members == allRead?.members)
    }

    /// With a store, the status a receipt gives rides in that receipt's outbox write: one transaction.
    @Test func withAStoreTheStatusGoesInTheOutboxWriteOfItsReceipt() {
        var engine = ClientEngineTests.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "phone", savedUpTo: 0, pending: [], accepted: [])), at: ClientEngineTests.start)
        _ = engine.handle(.send([ClientEngineTests.outgoing("m1")]), at: ClientEngineTests.start)
        var accepted = Simp_Accepted()
        accepted.messageID = "m1"
        accepted.toUser = "bob"
        accepted.seq = 5
        let actions = engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: ClientEngineTests.at(1))
        let writes = actions.compactMap { if case .writeOutbox(let write) = $0 { write } else { nil } }
        #expect(writes.map(\.status?.stage) == [.accepted])
        #expect(actions.contains { if case .status(let status, record: false) = $0 { status.stage == .accepted } else { false } },
                "the watchers hear it; the history gets it with the outbox")
    }

    /// After a restart a group message's next receipt goes on from what the history recorded.
    @Test func theEngineGoesOnFromTheRecordedStatuses() {
        var recorded = MessageStatus(id: "g1", to: "#crew", stage: .accepted)
        recorded.recipients = 2
        recorded.seq = 7
        recorded.members = ["bob": .delivered]
        var engine = ClientEngineTests.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "phone", savedUpTo: 0, pending: [], accepted: [], statuses: [recorded])),
                          at: ClientEngineTests.start)
        var delivered = Simp_Delivered()
        delivered.messageID = "g1"
        delivered.toUser = "#crew"
        delivered.member = "carol"
        delivered.seq = 7
        let actions = engine.handle(.control(Simp_Envelope(.delivered(delivered))), at: ClientEngineTests.at(1))
        let statuses = actions.compactMap { if case .status(let status, _) = $0 { status } else { nil } }
        #expect(statuses.map(\.stage) == [.delivered])
        #expect(statuses.first?.members == ["bob": .delivered, "carol": .delivered] && statuses.first?.seq == 7)
    }

    @Test func theBookForgetsTheOldestBeyondItsCapacity() {
        var book = StatusBook(capacity: 2)
        for index in 0..<5 { _ = book.apply(.accepted(id: "m\(index)", to: "bob", seq: UInt64(index + 1)), user: "alice") }
        #expect(book.status(of: "m0") == nil)
        #expect(book.status(of: "m4")?.seq == 5)
    }

    @Test func theHistoryKeepsConversationMessagesAndCountsOthersUnread() {
        var m = Simp_Message()
        m.messageID = "1"
        m.fromUser = "bob"
        m.toUser = "alice"
        m.content = "hi"
        m.seq = 3
        let fromBob = HistoryEntry.received(IncomingMessage(m), user: "alice")
        #expect(fromBob?.conversation == "bob" && fromBob?.unread == true && fromBob?.outgoing == false && fromBob?.stage == nil)
        m.toUser = "#crew"
        #expect(HistoryEntry.received(IncomingMessage(m), user: "alice")?.conversation == "#crew")
        m.fromUser = "alice"
        m.toUser = "bob"
        m.fromDevice = "laptop"
        let copy = HistoryEntry.received(IncomingMessage(m), user: "alice")
        #expect(copy?.conversation == "bob" && copy?.unread == false && copy?.outgoing == true && copy?.stage == .accepted)
        m.type = .read
        #expect(HistoryEntry.received(IncomingMessage(m), user: "alice") == nil, "a notice is not a message")
        m.type = .textPart
        m.messageID = "9/1/2"
        let part = HistoryEntry.received(IncomingMessage(m), user: "alice")
        #expect(part?.id == "9" && part?.complete == false && part?.text == "", "a part holds its message's place, not shown")
    }

    @Test func theEngineReportsEachStatusChangeBesideTheEvent() {
        var engine = ClientEngineTests.connected()
        _ = engine.handle(.track(id: "m1"), at: ClientEngineTests.start)
        _ = engine.handle(.send([ClientEngineTests.outgoing("m1"), ClientEngineTests.outgoing("m2")]), at: ClientEngineTests.start)
        func accepted(_ id: String, _ seq: UInt64) -> [ClientEngine.Action] {
            var accepted = Simp_Accepted()
            accepted.messageID = id
            accepted.toUser = "bob"
            accepted.seq = seq
            return engine.handle(.control(Simp_Envelope(.accepted(accepted))), at: ClientEngineTests.at(1))
        }
        func statuses(_ actions: [ClientEngine.Action]) -> [MessageStatus] {
            actions.compactMap { if case .status(let status, let record) = $0, record { status } else { nil } }
        }
        let tracked = statuses(accepted("m1", 5))
        #expect(tracked.map(\.stage) == [.accepted], "without a store, no outbox write carries it")
        #expect(tracked.first?.seq == 5 && tracked.first?.to == "bob")
        #expect(statuses(accepted("m2", 6)).isEmpty, "no handle follows m2 and no history keeps it")
    }

    @Test func withAStoreTheHistoryGetsWholeLongMessagesAndReadsFromOtherDevices() {
        var engine = ClientEngineTests.connected()
        _ = engine.handle(.storeOpened(ClientStore.Saved(device: "phone", savedUpTo: 0, pending: [], accepted: [])), at: ClientEngineTests.start)
        var part1 = Simp_Message()
        part1.seq = 1
        part1.type = .textPart
        part1.fromUser = "bob"
        part1.toUser = "alice"
        part1.messageID = LongText.PartID(base: "L", index: 1, count: 2).description
        part1.content = "ab"
        var part2 = part1
        part2.seq = 2
        part2.messageID = LongText.PartID(base: "L", index: 2, count: 2).description
        part2.content = "cd"
        let packed = DatagramBundle.pack([try! part1.serializedBytes(), try! part2.serializedBytes()], spread: 1)
        #expect(packed.count == 1 && packed.first?.kind == .bundle)
        _ = engine.handle(ClientEngineTests.datagram(.bundle, packed[0].payload), at: ClientEngineTests.start)
        let shown = engine.handle(.saved(.success(())), at: ClientEngineTests.at(1))
        let changes = shown.compactMap { if case .history(let change) = $0 { change } else { nil } }
        guard case .add(let entry)? = changes.first else {
            Issue.record("no whole message for the history: \(shown)")
            return
        }
        #expect(entry.id == "L" && entry.text == "abcd" && entry.conversation == "bob" && entry.unread)

        // alice read carol's message on her laptop: a READ notice from alice to carol, from that device.
        var read = Simp_Message()
        read.seq = 3
        read.type = .read
        read.fromUser = "alice"
        read.fromDevice = "laptop"
        read.toUser = "carol"
        read.messageID = "n1"
        read.content = "c7"
        _ = engine.handle(ClientEngineTests.datagram(.data, try! read.serializedBytes(), packet: 2), at: ClientEngineTests.at(2))
        let elsewhere = engine.handle(.saved(.success(())), at: ClientEngineTests.at(3))
        #expect(elsewhere.contains { if case .history(.readElsewhere(id: "c7", from: "carol")) = $0 { true } else { false } })
        #expect(!elsewhere.contains { if case .status = $0 { true } else { false } }, "no status of a sent message")
    }

    @Test func aHistoryWriteThatFailedIsReported() {
        var engine = ClientEngineTests.connected()
        let failed = engine.handle(.historyWritten(.failure(StoreWriteError(path: "/d/alice.sqlite", CocoaError(.fileWriteOutOfSpace)))),
                                   at: ClientEngineTests.start)
        #expect(ClientEngineTests.events(failed).count == 1)
    }
}

/// Which shown messages tell their senders they were read (`markShown`).
@Suite struct ReadMarkTests {
    static func message(_ id: String, in conversation: String, from: String, outgoing: Bool = false, seq: UInt64, parts: Int = 1,
                        groupSeq: UInt64 = 0) -> LocalMessage {
        LocalMessage(id: id, conversation: conversation, from: from, isOutgoing: outgoing, text: "t", imageLink: nil, sentMillis: 0,
                     seq: seq, position: 1, status: nil, unread: true, parts: parts, groupSeq: groupSeq)
    }

    @Test func aGroupMessageIsMarkedWithItsGroupAndPlace() {
        let marks = LocalMessage.readMarks([
            Self.message("d", in: "#team", from: "bob", seq: 5, groupSeq: 12),
            Self.message("e", in: "#team", from: "bob", seq: 6, parts: 2, groupSeq: 14),
            Self.message("f", in: "#team", from: "alice", outgoing: true, seq: 7, groupSeq: 15),
            Self.message("g", in: "bob", from: "bob", seq: 8),
        ])
        #expect(marks.map(\.messageID) == ["d", "e/2/2", "g"])
        #expect(marks.map(\.group) == ["team", "team", ""] && marks.map(\.groupSeq) == [12, 14, 0])
        #expect(marks.map(\.seq) == [5, 6, 8])
    }

    @Test func aReceivedMessageIsMarkedUnlessItIsTheUsersOwn() {
        func incoming(_ id: String, from: String, device: String = "", group: String? = nil, place: UInt64 = 0, seq: UInt64 = 3) -> IncomingMessage {
            var message = IncomingMessage(id: id, from: from, to: group.map { "#\($0)" } ?? "alice", text: "t", seq: seq,
                                          sentAt: Date(timeIntervalSince1970: 1), fromDevice: device)
            message.group = group
            message.groupSeq = place
            return message
        }
        let marks = [
            incoming("a", from: "bob"),
            incoming("b", from: "alice", device: "laptop"),
            // Every group message names its sender's device.
            incoming("c", from: "bob", device: "phone", group: "team", place: 8),
            incoming("d", from: "alice", device: "laptop", group: "team", place: 9),
            incoming("e", from: "bob", device: "phone", group: "team", place: 0),
            incoming("f", from: "bob", seq: 0),
        ].compactMap { $0.readMark(reader: "alice") }
        #expect(marks.map(\.messageID) == ["a", "c"])
        #expect(marks.map(\.group) == ["", "team"] && marks.map(\.groupSeq) == [0, 8])
    }

    @Test func onlyReceivedNumberedMessagesAreMarked() {
        let marks = LocalMessage.readMarks([
            Self.message("a", in: "bob", from: "bob", seq: 3),
            Self.message("b", in: "bob", from: "alice", outgoing: true, seq: 4),
            Self.message("c", in: "bob", from: "bob", seq: 0),
            // A group message kept before the history recorded its place cannot be marked.
            Self.message("d", in: "#team", from: "bob", seq: 5),
            Self.message("e", in: "bob", from: "bob", seq: 7, parts: 3),
        ])
        #expect(marks.map(\.messageID) == ["a", "e/3/3"], "a long message is marked by its last part")
        #expect(marks.map(\.seq) == [3, 7] && marks.allSatisfy { $0.fromUser == "bob" })
    }
}
