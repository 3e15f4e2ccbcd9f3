import Foundation
import MQTTLoad
import SIMPChaos
@testable import SIMPBench
import Testing


/// Always the same draw: the extremes of the uniform source.
private struct Fixed: RandomNumberGenerator {
    let value: UInt64
    mutating func next() -> UInt64 { value }
}

@Suite struct ChatScheduleTests {
    @Test func aUserNeverPicksItselfAndPicksEveryOtherUserAlike() {
        for user in 0..<4 {
            var schedule = ChatSchedule(user: user, users: 4, rate: 1, start: 0, random: SplitMix64(seed: UInt64(user)))
            var picks = [Int](repeating: 0, count: 4)
            for _ in 0..<30_000 { picks[schedule.take().peer] += 1 }
            #expect(picks[user] == 0)
            for other in 0..<4 where other != user {
                // 10,000 expected each; five standard deviations is about 400.
                #expect(abs(picks[other] - 10_000) < 500, "user \(user) picked \(other) \(picks[other]) times")
            }
        }
    }

    /// With contacts a user writes to the next ones round the ring, each alike, and to no one else.
    @Test func aUserWithContactsPicksOnlyThemAndEachAlike() {
        var schedule = ChatSchedule(user: 8, users: 10, rate: 1, start: 0, random: SplitMix64(seed: 5), contacts: 3)
        var picks = [Int: Int]()
        for _ in 0..<30_000 { picks[schedule.take().peer, default: 0] += 1 }
        #expect(Set(picks.keys) == [9, 0, 1])
        #expect(ChatPattern(sessions: 10, rate: 1, contacts: 3).contacts(of: 8) == [9, 0, 1])
        for (peer, count) in picks { #expect(abs(count - 10_000) < 500, "picked \(peer) \(count) times") }
    }

    @Test func twoUsersAlwaysPickEachOther() {
        var first = ChatSchedule(user: 0, users: 2, rate: 1, start: 0, random: Fixed(value: .max))
        var second = ChatSchedule(user: 1, users: 2, rate: 1, start: 0, random: Fixed(value: 0))
        #expect(first.take().peer == 1)
        #expect(second.take().peer == 0)
    }

    @Test func gapsAreExponentialWithTheRequestedMean() {
        let rate = 0.5
        var schedule = ChatSchedule(user: 0, users: 2, rate: rate, start: 0, random: SplitMix64(seed: 7))
        var gaps: [Double] = []
        var last = schedule.next
        for _ in 0..<100_000 {
            _ = schedule.take()
            gaps.append(Double(schedule.next - last) / 1e9)
            last = schedule.next
        }
        let mean = gaps.reduce(0, +) / Double(gaps.count)
        #expect(abs(mean - 1 / rate) < 0.02 * (1 / rate))
        // Memoryless: about e^-1 of the gaps are longer than the mean.
        let longer = Double(gaps.count { $0 > 1 / rate }) / Double(gaps.count)
        #expect(abs(longer - exp(-1)) < 0.01)
    }

    @Test func theFirstSendIsAGapAfterTheStartAndEachFollowsTheLastOnesDueTime() {
        // A uniform draw of 0 is a gap of 0; the largest draw a long but finite one.
        let immediate = ChatSchedule(user: 0, users: 2, rate: 2, start: 1_000, random: Fixed(value: 0))
        #expect(immediate.next == 1_000)
        var late = ChatSchedule(user: 0, users: 2, rate: 2, start: 1_000, random: Fixed(value: .max))
        #expect(late.next > 1_000 && late.next < 1_000 + 60_000_000_000)
        let first = late.take()
        #expect(first.at > 1_000 && late.next == first.at + (first.at - 1_000))
    }

    @Test func aLateLoopCatchesUpWithEverySendDueButNoneAfterTheWindow() {
        var schedule = ChatSchedule(user: 1, users: 3, rate: 100, start: 0, random: SplitMix64(seed: 3))
        let due = schedule.take(dueBy: 1_000_000_000, before: 500_000_000)
        // About 50 sends are due in the first half second at 100 a second.
        #expect((30...70).contains(due.count))
        #expect(due.allSatisfy { $0.at < 500_000_000 && $0.peer != 1 })
        #expect(zip(due, due.dropFirst()).allSatisfy { $0.at <= $1.at })
        #expect(schedule.next >= 500_000_000)
        #expect(schedule.take(dueBy: 1_000_000_000, before: 500_000_000).isEmpty)
    }

    @Test func messageNumbersOfDifferentUsersNeverMeet() {
        #expect(ChatPattern.counter(user: 0, sequence: 1) != ChatPattern.counter(user: 1, sequence: 1))
        #expect(ChatPattern.counter(user: 1, sequence: 0) == 1 << 40)
        #expect(ChatPattern(sessions: 2_000, rate: 0.5).offeredRate == 1_000)
    }
}

@Suite struct ChatCountTests {
    @Test func aMessageCountsOnceAndAgainAsADuplicate() {
        let clock = LoadClock(warmup: 0, duration: 1_000, drain: 0)
        var inbox = ChatInbox()
        var result = ChatResult()
        inbox.receive(counter: 5, sentAt: LoadClock.now(), clock, into: &result)
        inbox.receive(counter: 5, sentAt: LoadClock.now(), clock, into: &result)
        inbox.receive(counter: 6, sentAt: LoadClock.now(), clock, into: &result)
        #expect(result.received == 2 && result.duplicates == 1 && result.sendToReceive.totalCount == 2)
    }

    @Test func lostIsWhatWasSentNeitherFailedNorReceived() {
        var sender = ChatResult()
        sender.sent = 10
        sender.note(failure: "refused")
        var receiver = ChatResult()
        receiver.received = 7
        var total = ChatResult()
        total.merge(sender)
        total.merge(receiver)
        total.settleLost()
        #expect(total.lost == 2 && total.failed == 1)
    }

    @Test func twoSystemsGetTheRatiosOfServerCPUAndP99() {
        func run(serverMicros: Double, redisMicros: Double?, p99: UInt64) -> ChatRun {
            var result = ChatResult()
            for _ in 0..<100 { _ = result.sendToReceive.record(p99) }
            result.measuredSeconds = 1
            var processes = ["server": usage(micros: serverMicros)]
            if let redisMicros { processes["redis"] = usage(micros: redisMicros) }
            return ChatRun(result: result, usage: processes, serverBytesPerSession: 4096)
        }
        let report = ChatBenchReport(pattern: ChatPattern(sessions: 10, rate: 2), systems: [
            ChatSystemReport(system: "SIMP", run(serverMicros: 30, redisMicros: 10, p99: 2_000), delivered: true),
            ChatSystemReport(system: "Mosquitto", run(serverMicros: 10, redisMicros: nil, p99: 1_000), delivered: false),
        ])
        let table = report.table()
        #expect(table.hasPrefix("chat: 10 users x 2.0 msg/s = 20 msg/s offered"))
        #expect(table.contains("SIMP/Mosquitto: server CPU per message 3.00x (server + Redis 4.00x), send->receive p99 2.00x"))
        #expect(report.json().contains("\"mode\":\"chat\""))
        #expect(report.healthy)
    }

    private func usage(micros: Double) -> ProcessUsage {
        ProcessUsage(from: ProcessSample(cpuSeconds: 0, rssBytes: 0), to: ProcessSample(cpuSeconds: micros * 100 / 1e6, rssBytes: 1 << 20),
                     seconds: 1, messages: 100)
    }
}
