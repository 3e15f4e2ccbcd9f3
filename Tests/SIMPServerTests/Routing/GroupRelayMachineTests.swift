import Logging
import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

/// Every `GroupRelayMachine.Event` case, in and out: the event with an injected time (and, for
/// a change's entries, injected randomness), the actions it leads to.
@Suite struct GroupRelayMachineTests {
    struct Outage: Error {}

    static let t0 = NIODeadline.uptimeNanoseconds(1_000_000_000_000)

    static func at(_ offset: TimeAmount = .zero) -> Moment {
        Moment(deadline: t0 + offset, millis: 1_700_000_000_000 + offset.nanoseconds / 1_000_000)
    }

    static func machine(maxBatch: Int = 512) -> GroupRelayMachine {
        GroupRelayMachine(maxBatch: maxBatch, metrics: ServerMetrics(),
                          logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }),
                          randomBytes: { count in Array(repeating: 0xab, count: count) })
    }

    static func request(_ id: String, from: String = "alice") -> StoreRequest {
        StoreRequest(from: from, id: id, to: "#team", bytes: messageBytes(id, from: from))
    }

    static func messageBytes(_ id: String, from: String = "alice") -> [UInt8] {
        var message = Simp_Message()
        message.messageID = id
        message.fromUser = from
        message.toUser = "#team"
        message.content = "hi"
        return (try? message.serializedBytes()) ?? []
    }

    static let outage = RedisError(.io, "connection lost", mayHaveRun: true)

    static func copy(mark: UInt64, seqs: [UInt64], gap: Bool = false, nodes: [String] = [], held: Bool = false)
        -> Result<MessageStore.MemberCopy, RedisError> {
        .success(MessageStore.MemberCopy(gap: gap, mark: mark, isMember: true, seqs: seqs, nodes: nodes, held: held))
    }

    /// The actions as words a test can compare.
    static func describe(_ actions: [GroupRelayMachine.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .storeInGroup(let group, let batch): "store \(group) \(batch.map(\.id).joined(separator: ","))"
            case .copy(let job, let group, let items):
                "copy \(job) \(group) " + items.sorted { $0.member < $1.member }
                    .map { "\($0.member):\($0.entries.map { "\($0.seq)\($0.scriptKind)" }.joined(separator: "+"))" }.joined(separator: " ")
            case .readLog(let job, let group, let after, let upTo): "readLog \(job) \(group) \(after)-\(upTo)"
            case .readForResume(let key, let limit): "readForResume \(key.member) \(key.group) \(limit)"
            case .releaseHeld(let member, let group): "releaseHeld \(member) \(group)"
            case .change(let ticket, let change, let users, let lapses):
                "change \(ticket) \(change.action.rawValue) \(change.group) \(users.map { "\($0.name):\($0.entry.count)" }.joined(separator: ",")) \(lapses)"
            case .changeAnswered(let ticket, let result):
                switch result {
                case .success(.changed(let changes, _, _)): "changeAnswered \(ticket) changed \(changes.count)"
                case .success(.refused(let code)): "changeAnswered \(ticket) refused \(code)"
                case .failure: "changeAnswered \(ticket) failed"
                }
            case .publish(let notice, let nodes): "publish \(String(decoding: notice.payload, as: UTF8.self)) \(nodes.joined(separator: ","))"
            case .copied(let member, let copies): "copied \(member) \(copies.map { "\($0.seq)" }.joined(separator: ","))"
            case .answer(let request, let envelopes):
                "answer \(request.id) " + envelopes.map { envelope in
                    switch envelope.body {
                    case .accepted(let accepted)?: "accepted \(accepted.seq) \(accepted.recipients)"
                    case .failed(let failed)?: "failed \(failed.code)"
                    default: "?"
                    }
                }.joined(separator: ",")
            case .recheck(let member): "recheck \(member)"
            case .later(let due): "later \(due)"
            case .after(let delay, let due): "after \(delay.nanoseconds / 1_000_000)ms \(due)"
            }
        }
    }

    /// Feeds an event at `offset` after t0 and describes what came out.
    static func on(_ machine: inout GroupRelayMachine, _ event: GroupRelayMachine.Event, _ offset: TimeAmount = .zero) -> [String] {
        describe(machine.handle(event, at: at(offset)))
    }

    /// The copy items the machine asked for in `actions`, by job.
    static func items(_ actions: [GroupRelayMachine.Action]) -> (job: UInt64, items: [(member: String, entries: [GroupEntry])])? {
        for case .copy(let job, _, let items) in actions { return (job, items.sorted { $0.member < $1.member }) }
        return nil
    }

    /// Relays `ids`, flushes the group and stores them at seqs from `firstSeq`; returns the copy asked for.
    static func storeBatch(_ machine: inout GroupRelayMachine, _ ids: [String], firstSeq: UInt64 = 7,
                           members: [String] = ["alice", "bob"]) -> (job: UInt64, items: [(member: String, entries: [GroupEntry])]) {
        for id in ids { _ = machine.handle(.relay(request(id), group: "team"), at: at()) }
        _ = machine.handle(.due(.flush(group: "team")), at: at())
        let outcomes = ids.indices.map { GroupStoreOutcome.stored(seq: firstSeq + UInt64($0), entry: []) }
        let actions = machine.handle(.stored(group: "team", ids.map { request($0) }, outcomes: outcomes, members: members), at: at())
        return items(actions)!
    }

    // MARK: messages

    @Test func aMessageIsFlushedAtTheEndOfItsTickAndOneBatchPerGroupGoes() {
        var machine = Self.machine()
        #expect(Self.on(&machine, .relay(Self.request("m1"), group: "team")) == ["later flush(group: \"team\")"])
        // Another message in the same tick: the flush asked for takes it too.
        #expect(Self.on(&machine, .relay(Self.request("m2"), group: "team")) == ["later flush(group: \"team\")"])
        // A resend of a message under way is answered by the first.
        #expect(Self.on(&machine, .relay(Self.request("m1"), group: "team")).isEmpty)
        #expect(Self.on(&machine, .due(.flush(group: "team"))) == ["store team m1,m2"])
        // In flight: a new message waits for the batch's end, and a second flush finds nothing to send.
        #expect(Self.on(&machine, .relay(Self.request("m3"), group: "team")).isEmpty)
        #expect(Self.on(&machine, .due(.flush(group: "team"))).isEmpty)
    }

    @Test func aStoredBatchIsCopiedToEveryMemberAndItsSenderAnsweredOnceAllAreIn() throws {
        var machine = Self.machine()
        _ = Self.on(&machine, .relay(Self.request("m1"), group: "team"))
        _ = Self.on(&machine, .due(.flush(group: "team")))
        _ = Self.on(&machine, .relay(Self.request("m2"), group: "team"))
        let stored = machine.handle(.stored(group: "team", [Self.request("m1")], outcomes: [.stored(seq: 7, entry: [])],
                                            members: ["alice", "bob", "carol"]), at: Self.at())
        #expect(Self.describe(stored) == ["copy 1 team alice:7m bob:7m carol:7m"])
        let copy = try #require(Self.items(stored))
        let out = Self.on(&machine, .copied(job: copy.job, copy.items, [
            Self.copy(mark: 7, seqs: [11]), Self.copy(mark: 7, seqs: [3], nodes: ["node-2"]), Self.copy(mark: 7, seqs: [0], held: true),
        ]))
        // Pushes and notices go at once; the sender hears once every copy is made (or held), and the next batch goes.
        #expect(out == ["copied alice 11", "copied bob 3", "publish inbox bob node-2", "answer m1 accepted 7 2", "store team m2"])
    }

    @Test func aBatchRefusedAsAWholeIsAnsweredAtOnceAndTheNextGoes() {
        var machine = Self.machine()
        _ = Self.on(&machine, .relay(Self.request("m1", from: "mallory"), group: "team"))
        _ = Self.on(&machine, .due(.flush(group: "team")))
        let out = Self.on(&machine, .stored(group: "team", [Self.request("m1", from: "mallory")], outcomes: [.notAMember], members: []))
        #expect(out == ["answer m1 failed notAMember"])
        // Answered: a resend is a new store.
        #expect(Self.on(&machine, .relay(Self.request("m1", from: "mallory"), group: "team")) == ["later flush(group: \"team\")"])
    }

    @Test func whatRedisCouldNotStoreGoesFirstAfterAWaitAndIsGivenUpAfter30Seconds() throws {
        var machine = Self.machine()
        _ = Self.on(&machine, .relay(Self.request("m1"), group: "team"))
        _ = Self.on(&machine, .relay(Self.request("m2"), group: "team"))
        _ = Self.on(&machine, .due(.flush(group: "team")))
        _ = Self.on(&machine, .relay(Self.request("m3"), group: "team"))
        let stored = machine.handle(.stored(group: "team", [Self.request("m1"), Self.request("m2")],
                                            outcomes: [.stored(seq: 7, entry: []), .unavailable(Self.outage)], members: ["alice"]),
                                    at: Self.at())
        let copy = try #require(Self.items(stored))
        // m1 is answered; m2 waits, and goes first after the wait, before m3.
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 7, seqs: [4])]))
            == ["copied alice 4", "answer m1 accepted 7 0", "after 200ms storeAgain(group: \"team\")"])
        #expect(Self.on(&machine, .due(.flush(group: "team"))).isEmpty, "the group waits")
        #expect(Self.on(&machine, .due(.storeAgain(group: "team")), .milliseconds(200)) == ["store team m2,m3"])
        // Still unavailable 31 s after its first failure: its sender is told.
        var m2 = Self.request("m2")
        m2.ambiguousSince = Self.t0
        let out = Self.on(&machine, .stored(group: "team", [m2, Self.request("m3")],
                                            outcomes: [.unavailable(Self.outage), .unavailable(Self.outage)], members: []), .seconds(31))
        #expect(out == ["answer m2 failed storeUnavailable", "after 200ms storeAgain(group: \"team\")"])
    }

    @Test func aFailedCopyIsTriedAgainForItsMembersOnlyAndGivenUpAfter30Seconds() throws {
        var machine = Self.machine()
        let copy = Self.storeBatch(&machine, ["m1"], members: ["alice", "bob"])
        let failed = Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 7, seqs: [4]), .failure(Self.outage)]),
                             .milliseconds(10))
        #expect(failed == ["copied alice 4", "after 200ms copyAgain(job: 1)"])
        let again = machine.handle(.due(.copyAgain(job: copy.job)), at: Self.at(.milliseconds(210)))
        #expect(Self.describe(again) == ["copy 1 team bob:7m"])
        let retry = try #require(Self.items(again))
        // Redis is still down 31 s after the copy began: the message is not answered (its
        // sender's resend, found stored, copies again), and the group's next batch may go.
        #expect(Self.on(&machine, .copied(job: retry.job, retry.items, [.failure(Self.outage)]), .seconds(31)).isEmpty)
        #expect(machine.jobs.isEmpty)
        #expect(Self.on(&machine, .relay(Self.request("m1"), group: "team")) == ["later flush(group: \"team\")"])
        #expect(Self.on(&machine, .due(.flush(group: "team"))) == ["store team m1"])
    }

    @Test func aCopyStoppedAtAGapIsRepairedFromTheLog() throws {
        var machine = Self.machine()
        let copy = Self.storeBatch(&machine, ["m9"], firstSeq: 9, members: ["alice", "bob"])
        // bob's mark is 7: entry 8 (another node's) is not copied yet.
        let gap = Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 9, seqs: [5]), Self.copy(mark: 7, seqs: [0], gap: true)]))
        #expect(gap == ["copied alice 5", "readLog 1 team 7-9"])
        let log: [(seq: UInt64, bytes: [UInt8])] = [(8, Self.messageBytes("m8", from: "carol")), (9, Self.messageBytes("m9"))]
        let repair = machine.handle(.logRead(job: copy.job, .success(log)), at: Self.at())
        #expect(Self.describe(repair) == ["copy 1 team bob:8m+9m"])
        let repaired = try #require(Self.items(repair))
        #expect(Self.on(&machine, .copied(job: repaired.job, repaired.items, [Self.copy(mark: 9, seqs: [3, 4])]))
            == ["copied bob 3,4", "answer m9 accepted 9 1"])
    }

    @Test func aGapLeftAfterThreeRepairsOrAFailedLogReadCountsAsAFailedCopy() throws {
        var machine = Self.machine()
        let copy = Self.storeBatch(&machine, ["m9"], firstSeq: 9, members: ["bob"])
        let log: [(seq: UInt64, bytes: [UInt8])] = [(8, Self.messageBytes("m8", from: "carol")), (9, Self.messageBytes("m9"))]
        var items = copy.items
        for _ in 1..<GroupRelayMachine.gapAttempts {
            #expect(Self.on(&machine, .copied(job: copy.job, items, [Self.copy(mark: 7, seqs: [0, 0], gap: true)])) == ["readLog 1 team 7-9"])
            items = try #require(Self.items(machine.handle(.logRead(job: copy.job, .success(log)), at: Self.at()))).items
        }
        // The third round still stops at the gap: the copy is tried again later, as a failure.
        #expect(Self.on(&machine, .copied(job: copy.job, items, [Self.copy(mark: 7, seqs: [0, 0], gap: true)])) == ["after 200ms copyAgain(job: 1)"])
        // The next pass starts from the batch's own entries; its log read fails: a failure again.
        #expect(Self.describe(machine.handle(.due(.copyAgain(job: copy.job)), at: Self.at(.seconds(1)))) == ["copy 1 team bob:9m"])
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 7, seqs: [0], gap: true)]), .seconds(1)) == ["readLog 1 team 7-9"])
        #expect(Self.on(&machine, .logRead(job: copy.job, .failure(Outage())), .seconds(1)) == ["after 200ms copyAgain(job: 1)"])
        // A log that has nothing of theirs left to copy ends the pass as made.
        _ = machine.handle(.due(.copyAgain(job: copy.job)), at: Self.at(.seconds(2)))
        _ = Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 7, seqs: [0], gap: true)]), .seconds(2))
        #expect(Self.on(&machine, .logRead(job: copy.job, .success([])), .seconds(2)) == ["answer m9 accepted 9 0"])
    }

    @Test func aResendFoundCopiedAlreadyMakesTheMembersSessionsReadTheirInbox() throws {
        var machine = Self.machine()
        _ = Self.on(&machine, .relay(Self.request("m1"), group: "team"))
        _ = Self.on(&machine, .due(.flush(group: "team")))
        let stored = machine.handle(.stored(group: "team", [Self.request("m1")],
                                            outcomes: [.duplicate(seq: 7, entry: StoredMessage.appending(groupSeq: 7, to: Self.messageBytes("m1")))],
                                            members: ["bob"]), at: Self.at())
        let copy = try #require(Self.items(stored))
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 8, seqs: [0])])) == ["recheck bob", "answer m1 accepted 7 0"])
    }

    @Test func aCopyAnswerForNoJobIsIgnored() {
        var machine = Self.machine()
        #expect(Self.on(&machine, .copied(job: 42, [], [])).isEmpty)
        #expect(Self.on(&machine, .logRead(job: 42, .success([]))).isEmpty)
        #expect(Self.on(&machine, .due(.copyAgain(job: 42))).isEmpty)
    }

    // MARK: membership changes

    @Test func aChangesEntriesCarryAnIdFromTheGivenRandomnessAndItIsAnsweredOnceCopied() throws {
        var machine = Self.machine()
        let change = GroupRelayMachine.Change(action: .add, group: "team", by: "alice", entryBy: "alice", users: ["carol"],
                                              invited: ["dave"], maxMembers: 10, nowMillis: 1_000)
        let asked = machine.handle(.changeAsked(change, ticket: 5), at: Self.at())
        guard case .change(5, let made, let users, let lapses)? = asked.first else { Issue.record("no change: \(asked)"); return }
        #expect(made.group == "team" && lapses == 1_000 + GroupConsent.invitationLifetime)
        #expect(users.map(\.name) == ["carol", "dave"] && users[1].entry.isEmpty, "an invited user's entry is empty")
        let entry = try Simp_Message(serializedBytes: users[0].entry)
        #expect(entry.messageID == "gabababababababab" && entry.type == .groupAdded && entry.content == "carol" && entry.serverTime == 1_000)

        let changes = [GroupChangeMade(seq: 4, user: "carol", removes: false, bytes: StoredMessage.appending(groupSeq: 4, to: users[0].entry))]
        let members = ["alice", "carol"].map { name in
            var member = Simp_GroupMember()
            member.name = name
            return member
        }
        let copying = machine.handle(.changed(ticket: 5, group: "team", .success(.changed(changes, members: members, invited: ["dave"]))),
                                     at: Self.at())
        #expect(Self.describe(copying) == ["copy 1 team alice:4m carol:4a 0"])
        let copy = try #require(Self.items(copying))
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 4, seqs: [2]), Self.copy(mark: 4, seqs: [9])]))
            == ["copied alice 2", "copied carol 9", "changeAnswered 5 changed 1"])
    }

    @Test func aRefusedOrFailedChangeIsAnsweredAtOnce() {
        var machine = Self.machine()
        #expect(Self.on(&machine, .changed(ticket: 1, group: "team", .success(.refused(.notAMember)))) == ["changeAnswered 1 refused notAMember"])
        #expect(Self.on(&machine, .changed(ticket: 2, group: "team", .failure(Outage())))  == ["changeAnswered 2 failed"])
    }

    @Test func aChangeWhoseCopiesKeepFailingIsAnsweredAfter30Seconds() throws {
        var machine = Self.machine()
        let changes = [GroupChangeMade(seq: 4, user: "carol", removes: true, bytes: GroupFanoutTests.changeBytes("carol", .groupRemoved, seq: 4))]
        let copying = machine.handle(.changed(ticket: 3, group: "team", .success(.changed(changes, members: [], invited: []))), at: Self.at())
        let copy = try #require(Self.items(copying))
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [.failure(Self.outage)])) == ["after 200ms copyAgain(job: 1)"])
        _ = machine.handle(.due(.copyAgain(job: copy.job)), at: Self.at(.seconds(30)))
        #expect(Self.on(&machine, .copied(job: copy.job, copy.items, [.failure(Self.outage)]), .seconds(30)) == ["changeAnswered 3 changed 1"])
    }

    // MARK: held copies

    @Test func aResumeReadsTheLogAfterTheMarkOnceAtATime() {
        var machine = Self.machine()
        #expect(Self.on(&machine, .resume(member: "bob", group: "team")) == ["readForResume bob team 256"])
        #expect(Self.on(&machine, .resume(member: "bob", group: "team")).isEmpty, "one resume per member and group")
        #expect(Self.on(&machine, .resume(member: "bob", group: "other")) == ["readForResume bob other 256"])
        // A failed read ends it: the next receipt resumes again.
        let key = GroupFanout.Resume(member: "bob", group: "team")
        #expect(Self.on(&machine, .resumeRead(key, .failure(Outage()))).isEmpty)
        #expect(Self.on(&machine, .resume(member: "bob", group: "team")) == ["readForResume bob team 256"])
        // Nothing of theirs left: the hold is released.
        #expect(Self.on(&machine, .resumeRead(key, .success((mark: 9, isMember: true, log: [])))) == ["releaseHeld bob team"])
        #expect(machine.resuming == [GroupFanout.Resume(member: "bob", group: "other")])
    }

    @Test func aResumeCopiesWhatTheMemberLacksAndGoesOnWhileAFullPageWasTaken() throws {
        var machine = Self.machine()
        let key = GroupFanout.Resume(member: "bob", group: "team")
        _ = Self.on(&machine, .resume(member: "bob", group: "team"))
        let page = (10..<(10 + UInt64(GroupFanout.resumePage))).map { (seq: $0, bytes: Self.messageBytes("m\($0)")) }
        let copying = machine.handle(.resumeRead(key, .success((mark: 9, isMember: true, log: page))), at: Self.at())
        let copy = try #require(Self.items(copying))
        #expect(copy.items.map(\.member) == ["bob"] && copy.items[0].entries.count == GroupFanout.resumePage)
        let seqs = (1...UInt64(GroupFanout.resumePage)).map { $0 }
        let out = Self.on(&machine, .copied(job: copy.job, copy.items, [Self.copy(mark: 265, seqs: seqs)]))
        #expect(out.count == 2 && out[0].hasPrefix("copied bob 1,2,3") && out[1] == "readForResume bob team 256")
        // Held again at the bound: no next page until the member confirms; no time-based retries either.
        let next = try #require(Self.items(machine.handle(.resumeRead(key, .success((mark: 265, isMember: true, log: page.map { ($0.seq + 256, $0.bytes) }))),
                                                         at: Self.at())))
        #expect(Self.on(&machine, .copied(job: next.job, next.items, [Self.copy(mark: 300, seqs: [1], held: true)])) == ["copied bob 1"])
        #expect(machine.resuming.isEmpty && machine.jobs.isEmpty)
        // A failed copy ends the resume too (the next receipt resumes again).
        _ = Self.on(&machine, .resume(member: "bob", group: "team"))
        let tail: [(seq: UInt64, bytes: [UInt8])] = [(301, Self.messageBytes("x"))]
        let last = try #require(Self.items(machine.handle(.resumeRead(key, .success((mark: 300, isMember: true, log: tail))), at: Self.at())))
        #expect(Self.on(&machine, .copied(job: last.job, last.items, [.failure(Self.outage)])).isEmpty)
        #expect(machine.resuming.isEmpty && machine.jobs.isEmpty)
    }
}
