import Foundation
import Histogram
import NIOCore

/// Chat traffic, offered to SIMP and to the broker alike: `sessions` users, each sending at
/// Poisson times averaging `rate` messages a second, each message to a uniformly random other
/// user. Open loop: a send is due by the clock, whatever became of the earlier ones.
public struct ChatPattern: Sendable, Codable {
    public var sessions: Int
    /// Messages a second per user, on average.
    public var rate: Double
    public var payloadBytes: Int
    public var duration: Double
    public var warmup: Double
    public var drain: Double
    /// Each user writes to this many others only (the next ones by index, round the ring),
    /// as people write to their contacts; nil: to anyone. With end-to-end encryption each
    /// such conversation is made (its MLS group) before the run.
    public var contacts: Int?

    public init(sessions: Int, rate: Double, payloadBytes: Int = 64, duration: Double = 10, warmup: Double = 1, drain: Double = 10,
                contacts: Int? = nil) {
        self.sessions = sessions
        self.rate = rate
        self.payloadBytes = payloadBytes
        self.duration = duration
        self.warmup = warmup
        self.drain = drain
        self.contacts = contacts
    }

    /// The users `user` writes to: with `contacts`, the next ones round the ring.
    public func contacts(of user: Int) -> [Int] {
        guard let contacts else { return (0..<sessions).filter { $0 != user } }
        return (1...min(contacts, sessions - 1)).map { (user + $0) % sessions }
    }

    /// Messages a second offered by all users together.
    public var offeredRate: Double { Double(sessions) * rate }

    public func clock(start: UInt64 = LoadClock.now()) -> LoadClock {
        LoadClock(warmup: warmup, duration: duration, drain: drain, start: start)
    }

    /// Each message's number is unique in the run: the user's index above its own count.
    public static func counter(user: Int, sequence: UInt64) -> UInt64 { UInt64(user) << 40 | sequence }
}

/// When one user sends and to whom. The gaps between sends are exponential (a Poisson process
/// of `rate` per second), so the load has the bursts real users make, not a metronome's.
public struct ChatSchedule<Random: RandomNumberGenerator> {
    public let user: Int
    public let users: Int
    public let rate: Double
    /// Writes only to the next `contacts` users round the ring (`ChatPattern.contacts`).
    public let contacts: Int?
    /// Monotonic nanoseconds at which the next send is due.
    public private(set) var next: UInt64
    private var random: Random

    /// The first send is one gap after `start`, not at it: every user starting at once would
    /// be a burst no Poisson process makes.
    public init(user: Int, users: Int, rate: Double, start: UInt64, random: Random, contacts: Int? = nil) {
        precondition(users >= 2 && (0..<users).contains(user) && rate > 0, "a chat needs two users and a positive rate")
        precondition(contacts.map { $0 >= 1 } ?? true, "a user with contacts has at least one")
        self.user = user
        self.users = users
        self.rate = rate
        self.contacts = contacts.map { min($0, users - 1) }
        self.random = random
        next = 0
        next = start + gap()
    }

    /// The send due at `next` (its time and peer); `next` moves on by a fresh gap. Each send
    /// is due a gap after the previous one was due, not after it went out, so a late loop
    /// catches up and the offered rate holds.
    public mutating func take() -> (at: UInt64, peer: Int) {
        let due = next
        let chosen = peer()
        next = due + gap()
        return (due, chosen)
    }

    /// The sends due by `now` that fall before `end` (the window's end), taken off the schedule.
    public mutating func take(dueBy now: UInt64, before end: UInt64) -> [(at: UInt64, peer: Int)] {
        var due: [(at: UInt64, peer: Int)] = []
        while next <= now, next < end { due.append(take()) }
        return due
    }

    /// Nanoseconds to the next send: -ln(1 - U) / rate for U uniform in [0, 1).
    mutating func gap() -> UInt64 {
        let uniform = Double.random(in: 0..<1, using: &random)
        return UInt64(-log1p(-uniform) / rate * 1e9)
    }

    /// Uniform over the other users: one of users - 1, those from `user` on shifted by one.
    mutating func peer() -> Int {
        if let contacts { return (user + 1 + Int.random(in: 0..<contacts, using: &random)) % users }
        let pick = Int.random(in: 0..<(users - 1), using: &random)
        return pick >= user ? pick + 1 : pick
    }
}

/// One chat run's figures, per user and then summed. Counts are of the whole run unless they
/// say "in window"; latencies (microseconds) are of the messages sent in the measured window.
public struct ChatResult: Sendable {
    public var sent = 0
    public var sentInWindow = 0
    /// Distinct messages received.
    public var received = 0
    /// Distinct messages that arrived while the window lasted: the work the CPU figures pay for.
    public var receivedInWindow = 0
    public var duplicates = 0
    /// Sent, not failed, and not received by the end of the drain.
    public var lost = 0
    public var failed = 0
    /// At most five.
    public var failures: [String] = []
    /// What went wrong besides a message failing (a connection lost, a malformed packet); at most five.
    public var errors: [String] = []
    /// Connections lost (SIMP: the client's disconnected events; it reconnects by itself).
    public var disconnects = 0
    public var measuredSeconds = 0.0
    public var sendToReceive = ChatResult.histogram()
    /// To SIMP's accepted, or to MQTT's PUBACK.
    public var sendToAccepted = ChatResult.histogram()
    /// To SIMP's delivered (the recipient confirmed it).
    public var sendToDelivered = ChatResult.histogram()
    /// From when a send was due to when it went out: how far the bench fell behind its own
    /// schedule. Large values mean the offered rate was not really offered.
    public var sendLag = ChatResult.histogram()

    public init() {}

    /// 1 µs to 100 s at three significant digits.
    public static func histogram() -> Histogram<UInt64> {
        Histogram(lowestDiscernibleValue: 1, highestTrackableValue: 100_000_000, numberOfSignificantValueDigits: .three)
    }

    public mutating func note(failure: String) {
        failed += 1
        if failures.count < 5 { failures.append(failure) }
    }

    public mutating func note(error: String) {
        if errors.count < 5 { errors.append(error) }
    }

    public mutating func merge(_ part: ChatResult) {
        sent += part.sent
        sentInWindow += part.sentInWindow
        received += part.received
        receivedInWindow += part.receivedInWindow
        duplicates += part.duplicates
        failed += part.failed
        failures += part.failures.prefix(max(0, 5 - failures.count))
        errors += part.errors.prefix(max(0, 5 - errors.count))
        disconnects += part.disconnects
        sendToReceive.add(part.sendToReceive)
        sendToAccepted.add(part.sendToAccepted)
        sendToDelivered.add(part.sendToDelivered)
        sendLag.add(part.sendLag)
    }

    /// Once every part is merged: each message goes to one user, so only the sums tell what
    /// never arrived.
    public mutating func settleLost() {
        lost = max(0, sent - failed - received)
    }

    /// The lag counts in the window only: at the start every user's first timer is armed at
    /// once, which is the bench setting up, not falling behind.
    public mutating func recordSend(due: UInt64, at now: UInt64, _ clock: LoadClock) {
        sent += 1
        guard clock.measured(now) else { return }
        sentInWindow += 1
        _ = sendLag.record(FanOutResult.micros(from: due, to: now))
    }
}

/// What one user received: each message once, its latency if it was sent in the window.
public struct ChatInbox: Sendable {
    private var seen = Set<UInt64>()

    public init() {}

    public mutating func receive(counter: UInt64, sentAt: UInt64, _ clock: LoadClock, into result: inout ChatResult) {
        guard seen.insert(counter).inserted else {
            result.duplicates += 1
            return
        }
        let now = LoadClock.now()
        result.received += 1
        if clock.measured(now) { result.receivedInWindow += 1 }
        if clock.measured(sentAt) { _ = result.sendToReceive.record(FanOutResult.micros(from: sentAt, to: now)) }
    }
}

/// The figures of every user on one event loop. Users add to their loop's tally rather than
/// keep their own: a histogram is about 150 KB, and thousands of users each with four would
/// cost the bench gigabytes. Confined to `loop`, except `snapshot`, which hops to it.
public final class ChatTally: @unchecked Sendable {
    public let loop: any EventLoop
    public var result = ChatResult()

    public init(loop: any EventLoop) {
        self.loop = loop
    }

    /// One tally per distinct loop among `loops`.
    public static func perLoop(_ loops: [any EventLoop]) -> [ObjectIdentifier: ChatTally] {
        var tallies: [ObjectIdentifier: ChatTally] = [:]
        for loop in loops where tallies[ObjectIdentifier(loop)] == nil { tallies[ObjectIdentifier(loop)] = ChatTally(loop: loop) }
        return tallies
    }

    /// Waits for every one of `futures` at once: awaiting thousands one by one costs a thread
    /// hop each, and at the start that delays the first sends by a good part of a second.
    public static func waitForAll(_ futures: [EventLoopFuture<Void>]) async throws {
        guard let first = futures.first else { return }
        try await EventLoopFuture.andAllSucceed(futures, on: first.eventLoop).get()
    }

    /// Every tally's figures, summed, with what never arrived worked out.
    public static func total(_ tallies: some Collection<ChatTally>, seconds: Double) async throws -> ChatResult {
        var total = ChatResult()
        for part in tallies.map({ tally in tally.loop.submit { tally.result } }) { total.merge(try await part.get()) }
        total.settleLost()
        total.measuredSeconds = seconds
        return total
    }
}
