import Foundation
import Histogram
import MQTTLoad
import NIOCore
@_spi(NIO) import SIMPClient

/// Chat traffic through SIMPClient: `sessions` users bench-chat0..., logged in and bound, each
/// sending at Poisson times to a random other user (`ChatPattern`). Every client shares
/// `group`; each user lives on its client's loop and sends from timers there, so the clock,
/// not the answers, decides when a message goes.
public enum ChatLoad {
    public static func user(_ index: Int) -> String { "bench-chat\(index)" }

    /// `processes` are sampled for CPU and memory over the measured window ("bench" is this
    /// process), per message received in it. The server's growth in RSS from before the first
    /// login to the window's end, per session, comes back with the result.
    public static func run(_ pattern: ChatPattern, placement: Placement, group: any EventLoopGroup, processes: ProcessGroups,
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> ChatRun {
        let before = serverRSS(processes)
        progress("connecting \(pattern.sessions) users to \(placement.nodes.map(\.description).joined(separator: ", "))")
        let stored = placement.dataDirectory != nil
        let users = (0..<pattern.sessions).map { Chatter(user: $0, pattern: pattern, stored: stored) }
        let clients = try await IdleLoad.connectAll(0..<pattern.sessions, placement, group, name: user,
                                                     eventHandler: { users[$0].handle })
        if placement.endToEnd { try await prepareEncryption(clients, pattern, progress: progress) }
        let tallies = ChatTally.perLoop(clients.map(\.eventLoop))
        try await ChatTally.waitForAll(zip(users, clients).map { $0.attach($1, tally: tallies[ObjectIdentifier($1.eventLoop)]!) })
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured, \(Int(pattern.offeredRate)) msg/s offered")
        let start = LoadClock.now()
        let clock = pattern.clock(start: start)
        let window = UsageWindow.measure(processes, after: pattern.warmup, seconds: pattern.duration)
        let result = try await load(users, Array(tallies.values), clock, start: start)
        progress("done: \(result.sent) sent, \(result.received) received")
        let run = ChatRun(result, await window.value, serverRSSBefore: before, sessions: pattern.sessions)
        for client in clients { await client.close() }
        return run
    }

    /// Every user's clock first, so nobody counts a message before its own run began; then the sends.
    private static func load(_ users: [Chatter], _ tallies: [ChatTally], _ clock: LoadClock, start: UInt64) async throws -> ChatResult {
        try await ChatTally.waitForAll(users.map { $0.prepare(clock, start: start) })
        for user in users { user.start() }
        // Delivered means received, so once every sender settled every receiver has counted.
        try await ChatTally.waitForAll(users.map { $0.settled() })
        return try await ChatTally.total(tallies, seconds: Double(clock.measureUntil - clock.measureFrom) / 1e9)
    }

    /// Every user's identity and KeyPackages; with contacts, every conversation's MLS group too
    /// (each user's first message to each contact makes it), so the run measures messages, not
    /// first contacts. Without contacts a first message to someone new makes the group in the run.
    private static func prepareEncryption(_ clients: [SIMPClient], _ pattern: ChatPattern,
                                          progress: @Sendable (String) -> Void) async throws {
        progress("setting up \(clients.count) identities")
        try await inBatches(clients.indices) { _ = try await clients[$0].setUpIdentity() }
        guard pattern.contacts != nil else { return }
        progress("making \(clients.count * pattern.contacts(of: 0).count) encrypted conversations")
        try await inBatches(clients.indices) { index in
            for peer in pattern.contacts(of: index) { _ = try await clients[index].send(to: user(peer), text: "hello") }
        }
    }

    /// `body` for each index, 32 at a time.
    private static func inBatches(_ indices: Range<Int>, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for index in indices {
                if index - indices.lowerBound >= 32 { try await tasks.next() }
                tasks.addTask { try await body(index) }
            }
            try await tasks.waitForAll()
        }
    }

    private static func serverRSS(_ processes: ProcessGroups) -> Int? {
        guard let pids = processes.first(where: { $0.name == "server" })?.pids else { return nil }
        return ProcessSample.sum(pids.compactMap(ProcessSample.read))?.rssBytes
    }

    /// One user: sends on its schedule, counts what it receives into its loop's tally. Confined
    /// to its client's loop like `SIMPLoad.Sender`: the client's events arrive there, and
    /// `prepare`, `start` and `settled` hop to it.
    final class Chatter: @unchecked Sendable {
        private var client: SIMPClient!
        private var tally: ChatTally!
        private let user: Int
        private let pattern: ChatPattern
        private var clock = LoadClock(warmup: 0, duration: 0, drain: 0, start: 0)
        private var schedule: ChatSchedule<SystemRandomNumberGenerator>?
        private var sequence: UInt64 = 0
        /// Send times of the messages not yet delivered or failed, by id.
        private var sentAt: [String: UInt64] = [:]
        private var inbox = ChatInbox()
        private var done: EventLoopPromise<Void>?
        private var windowOver = false
        /// With a data directory: messages sent with `try await send` (`post` cannot write the
        /// outbox on disk), whose ids come back after their events may have come.
        private let stored: Bool
        /// Sends whose id is not back yet.
        private var sending = 0
        /// Events of messages whose id was not back yet: when each came.
        private var early: [String: (accepted: UInt64?, settled: UInt64?, failure: String?)] = [:]

        init(user: Int, pattern: ChatPattern, stored: Bool = false) {
            self.user = user
            self.pattern = pattern
            self.stored = stored
        }

        private var loop: any EventLoop { client.eventLoop }

        /// On the loop, where the client's events already arrive.
        func attach(_ client: SIMPClient, tally: ChatTally) -> EventLoopFuture<Void> {
            client.eventLoop.submit { [self] in
                self.client = client
                self.tally = tally
            }
        }

        func prepare(_ clock: LoadClock, start: UInt64) -> EventLoopFuture<Void> {
            loop.submit { [self] in
                self.clock = clock
                schedule = ChatSchedule(user: user, users: pattern.sessions, rate: pattern.rate, start: start,
                                        random: SystemRandomNumberGenerator(), contacts: pattern.contacts)
                done = loop.makePromise()
            }
        }

        func start() {
            loop.execute { [self] in
                loop.scheduleTask(deadline: .uptimeNanoseconds(clock.drainUntil)) { [self] in finish() }
                arm()
            }
        }

        /// Once the window is over and every message sent was delivered or failed (or the drain ended).
        func settled() -> EventLoopFuture<Void> {
            loop.flatSubmit { [self] in done?.futureResult ?? loop.makeSucceededVoidFuture() }
        }

        func handle(_ event: ClientEvent) {
            // Before `attach` nothing is sent, so nothing of the run can arrive.
            guard let tally else { return }
            switch event {
            case .message(let message):
                guard let (counter, sentAt) = SIMPLoad.parse(message.text) else { return }
                inbox.receive(counter: counter, sentAt: sentAt, clock, into: &tally.result)
            case .retracted:
                // An early message whose store failed: its sender counts it failed (as in `SIMPLoad.Receiver`).
                tally.result.received -= 1
            case .accepted(let id, _, _):
                if let start = sentAt[id] { record(from: start, into: &tally.result.sendToAccepted) } else if sending > 0 {
                    early[id, default: (nil, nil, nil)].accepted = LoadClock.now()
                }
            case .delivered(let id, _, _):
                if sentAt[id] == nil, sending > 0 { early[id, default: (nil, nil, nil)].settled = LoadClock.now() }
                settle(id) { record(from: $0, to: LoadClock.now(), into: &tally.result.sendToDelivered) }
            case .failed(let id, _, let reason, _):
                if sentAt[id] == nil, sending > 0 { early[id, default: (nil, nil, nil)].failure = reason }
                settle(id) { _ in tally.result.note(failure: reason) }
            case .disconnected(let reason), .ended(let reason):
                tally.result.disconnects += 1
                tally.result.note(error: "\(ChatLoad.user(user)): \(reason)")
            case .error(let reason, _):
                tally.result.note(error: "\(ChatLoad.user(user)): \(reason)")
            default:
                return
            }
        }

        private func record(from start: UInt64, to end: UInt64 = LoadClock.now(), into histogram: inout Histogram<UInt64>) {
            if clock.measured(start) { _ = histogram.record(FanOutResult.micros(from: start, to: end)) }
        }

        /// A message's fate is known: `body` gets its send time, and once the window is over
        /// and nothing is left unsettled, so is this user.
        private func settle(_ id: String, _ body: (UInt64) -> Void) {
            guard let start = sentAt.removeValue(forKey: id) else { return }
            body(start)
            if windowOver, sentAt.isEmpty, sending == 0 { finish() }
        }

        private func arm() {
            guard let next = schedule?.next, next < clock.measureUntil else { return sendingOver() }
            loop.scheduleTask(deadline: .uptimeNanoseconds(next)) { [self] in fire() }
        }

        private func fire() {
            for (due, peer) in schedule?.take(dueBy: LoadClock.now(), before: clock.measureUntil) ?? [] { send(to: peer, due: due) }
            arm()
        }

        private func send(to peer: Int, due: UInt64) {
            sequence += 1
            let now = LoadClock.now()
            // Counted as sent either way: a refused post is a failure, neither lost nor left out.
            tally.result.recordSend(due: due, at: now, clock)
            let text = SIMPLoad.text(ChatPattern.counter(user: user, sequence: sequence), now, size: pattern.payloadBytes)
            guard !stored else { return sendStored(text, to: ChatLoad.user(peer), at: now) }
            do {
                sentAt[try client.post(to: ChatLoad.user(peer), text: text)] = now
            } catch {
                tally.result.note(failure: "send: \(error)")
            }
        }

        /// `try await send` from a task on the client's loop; its id, once back, takes the
        /// events that came before it.
        private func sendStored(_ text: String, to peer: String, at start: UInt64) {
            sending += 1
            let client = client!
            Task(executorPreference: client.taskExecutor) { [self] in
                let id: Result<String, any Error>
                do { id = .success(try await client.send(to: peer, text: text)) } catch { id = .failure(error) }
                loop.execute { [self] in sent(id, at: start) }
            }
        }

        private func sent(_ id: Result<String, any Error>, at start: UInt64) {
            sending -= 1
            switch id {
            case .failure(let error):
                tally.result.note(failure: "send: \(error)")
            case .success(let id):
                sentAt[id] = start
                if let came = early.removeValue(forKey: id) {
                    if let accepted = came.accepted { record(from: start, to: accepted, into: &tally.result.sendToAccepted) }
                    if let failure = came.failure { settle(id) { _ in tally.result.note(failure: failure) } }
                    if let settled = came.settled { settle(id) { record(from: $0, to: settled, into: &tally.result.sendToDelivered) } }
                }
            }
            if windowOver, sentAt.isEmpty, sending == 0 { finish() }
        }

        private func sendingOver() {
            windowOver = true
            if sentAt.isEmpty, sending == 0 { finish() }
        }

        /// What arrives later still counts, until the tallies are read.
        private func finish() {
            schedule = nil
            early.removeAll()
            done?.succeed(())
            done = nil
        }
    }
}

/// A chat run's figures, the CPU and memory of the processes over its window, and the server's
/// memory per session.
public struct ChatRun: Sendable {
    public var result: ChatResult
    public var usage: [String: ProcessUsage]
    public var serverBytesPerSession: Int?

    public init(result: ChatResult, usage: [String: ProcessUsage], serverBytesPerSession: Int? = nil) {
        self.result = result
        self.usage = usage
        self.serverBytesPerSession = serverBytesPerSession
    }

    /// CPU per message received in the window; the server's RSS at the window's end against
    /// `serverRSSBefore` (before the first login), per session.
    init(_ result: ChatResult, _ window: UsageWindow, serverRSSBefore before: Int?, sessions: Int) {
        self.init(result: result, usage: window.usage(messages: result.receivedInWindow))
        if let before, let after = window.samples["server"]?.end.rssBytes { serverBytesPerSession = (after - before) / sessions }
    }
}

extension ChatLoad {
    /// The same pattern through a running broker (`MQTTChat`): its CPU and memory over the
    /// window (as "server", beside "bench"), and its growth in RSS per session.
    public static func throughBroker(_ pattern: ChatPattern, port: Int, pid: Int32, group: any EventLoopGroup,
                                     progress: @Sendable (String) -> Void = { _ in }) async throws -> ChatRun {
        let before = ProcessSample.read(pid: pid)?.rssBytes
        progress("connecting \(pattern.sessions) MQTT users")
        let users = try await MQTTChat.open(pattern, host: "127.0.0.1", port: port, group: group)
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured, \(Int(pattern.offeredRate)) msg/s offered")
        let window = UsageWindow.measure([("bench", [getpid()]), ("server", [pid])], after: pattern.warmup, seconds: pattern.duration)
        let result: ChatResult
        do {
            result = try await MQTTChat.load(users)
        } catch {
            await MQTTChat.close(users)
            throw error
        }
        progress("done: \(result.sent) sent, \(result.received) received")
        await MQTTChat.close(users)
        return ChatRun(result, await window.value, serverRSSBefore: before, sessions: pattern.sessions)
    }
}
