import NIOCore
import SIMPCore
import SIMPRedis
import Testing
@testable import SIMPServer

@Suite struct GroupQueueTests {
    func request(_ id: String, from: String = "alice") -> StoreRequest {
        StoreRequest(from: from, id: id, to: "#team", bytes: [1])
    }

    /// Queues and says whether the group's batch may go now.
    func enqueue(_ queue: inout GroupQueue, _ id: String, from: String = "alice", group: String = "team") -> Bool {
        queue.enqueue(request(id, from: from), group: group)
    }

    func next(_ queue: inout GroupQueue, _ group: String = "team") -> [String]? {
        queue.nextBatch(group)?.map(\.id)
    }

    @Test func oneBatchPerGroupIsInFlightAndTheNextHasWhatArrivedMeanwhile() {
        var queue = GroupQueue(maxBatch: 2)
        #expect([enqueue(&queue, "m1"), enqueue(&queue, "m2"), enqueue(&queue, "m3")] == [true, true, true])
        #expect(next(&queue) == ["m1", "m2"])
        // In flight: a new message waits, and no batch goes.
        #expect(enqueue(&queue, "m4") == false)
        #expect(next(&queue) == nil)
        // Another group is not held back.
        #expect(enqueue(&queue, "x1", group: "other"))
        let wait = queue.finished("team", retry: [])
        #expect(wait == nil)
        #expect(next(&queue) == ["m3", "m4"])
    }

    @Test func aResendOfAMessageUnderWayIsAnsweredByTheFirst() {
        var queue = GroupQueue(maxBatch: 10)
        #expect(enqueue(&queue, "m1"))
        #expect(enqueue(&queue, "m1") == false)
        #expect(enqueue(&queue, "m1", from: "bob"))
        let batch = queue.nextBatch("team") ?? []
        #expect(batch.count == 2)
        queue.answered(batch[0])
        _ = queue.finished("team", retry: [])
        #expect(enqueue(&queue, "m1"))
    }

    @Test func whatRedisCouldNotTakeGoesFirstAfterAWait() {
        var queue = GroupQueue(maxBatch: 10)
        _ = enqueue(&queue, "m1")
        let batch = queue.nextBatch("team") ?? []
        _ = enqueue(&queue, "m2")
        let wait = queue.finished("team", retry: batch)
        #expect(wait == GroupFanout.retryDelay)
        #expect(next(&queue) == nil)
        queue.resume("team")
        #expect(next(&queue) == ["m1", "m2"])
    }

    @Test func aStoredBatchSettlesWhatRedisAnsweredAndRetriesAnOutageFor30Seconds() {
        let t0 = NIODeadline.uptimeNanoseconds(100_000_000_000)
        let outage = RedisError(.io, "connection lost", mayHaveRun: true)
        var old = request("m3")
        old.ambiguousSince = t0 - .seconds(31)
        let result = GroupFanout.stored([request("m1"), request("m2"), old, request("m4")],
                                        [.stored(seq: 5, entry: []), .unavailable(outage), .unavailable(outage), .duplicate(seq: 2, entry: [])],
                                        now: t0)
        #expect(result.retry.map(\.id) == ["m2"] && result.retry.first?.ambiguousSince == t0)
        #expect(result.settled.map(\.0.id) == ["m1", "m3", "m4"])
        // The stored one's entry carries its place; the duplicate whose entry was trimmed is not copied again.
        #expect(result.entries.map(\.seq) == [5])
        #expect(result.resent)
        #expect(GroupFanout.answersNow(.stored(seq: 5, entry: []), copiesComplete: false) == false)
        #expect(GroupFanout.answersNow(.notAMember, copiesComplete: false))
    }

    @Test func aCopyRoundSaysWhatToPushWhomToTellAndWhereItStoppedAtAGap() throws {
        var message = Simp_Message()
        message.messageID = "m1"
        message.fromUser = "alice"
        message.toUser = "#team"
        let bytes: [UInt8] = try message.serializedBytes()
        let entries = [GroupEntry(seq: 7, kind: .other, bytes: bytes)]
        let items = [(member: "bob", entries: entries), (member: "carol", entries: entries), (member: "dave", entries: entries),
                     (member: "erin", entries: entries)]
        let results: [Result<MessageStore.MemberCopy, RedisError>] = [
            .success(.init(gap: false, mark: 7, isMember: true, seqs: [3], nodes: ["n2"])),
            .success(.init(gap: true, mark: 5, isMember: true, seqs: [0], nodes: [])),
            .failure(RedisError(.io, "connection lost")),
            .success(.init(gap: false, mark: 9, isMember: true, seqs: [0], nodes: [])),
        ]
        let round = GroupFanout.copied(items, results, recheckFound: true)
        #expect(round.copies.map { $0.member } == ["bob"] && round.copies.first?.copies.map { $0.seq } == [3])
        #expect(round.notify.map { $0.member } == ["bob"])
        #expect(round.gaps == ["carol": GroupFanout.Gap(mark: 5, isMember: true, upTo: 7)])
        #expect(round.failed == ["dave"])
        // erin had it already (a resend found it copied): her sessions read their inbox.
        #expect(round.recheck == ["erin"])
    }
}
