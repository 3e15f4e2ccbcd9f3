import Foundation
import MQTTLoad
import NIOCore
@_spi(NIO) import SIMPClient
import SIMPCore

/// The group fan-out through SIMPClient: a sender and `members` receivers in one group (the
/// sender owns it, so it has members + 1), the sender keeping W messages to `#NAME` in flight,
/// a slot freed by the group's accepted (the message is in every member's inbox). Every client
/// shares `group`, one loop each, as in `SIMPLoad`.
public enum GroupLoad {
    public static let sender = "bench-gs"

    public static func member(_ index: Int) -> String { "bench-gm\(index)" }

    /// Clients registered and connected at once while the run is being set up.
    static let connecting = 16
    static let addedAtOnce = 500

    /// `processes` are sampled for CPU and memory over the measured window ("bench" is this
    /// process), per delivery in it.
    public static func run(_ pattern: FanOutPattern, placement: Placement, group: any EventLoopGroup, processes: ProcessGroups,
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> (FanOutResult, [String: ProcessUsage]) {
        // A name of its own per run, so a rerun against the same Redis does not find it taken.
        let name = "bench-g" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        progress("connecting 1 sender and \(pattern.members) members of #\(name) to \(placement.nodes.map(\.description).joined(separator: ", "))")
        let receivers = try await connectReceivers(pattern.members, group: name, placement: placement, loops: group)
        let sender = Sender(to: GroupName.address(name), members: pattern.members, pattern: pattern)
        let stored = placement.dataDirectory != nil
        do {
            // With a data directory the sender reads its events as a stream (`sendAsync`).
            sender.client = try await SIMPLoad.connectedClient(Self.sender, placement.configuration(startingAt: 0), group.next(),
                                                               eventHandler: stored ? nil : sender.handle)
            // Its identity and KeyPackages before the group: creating it commits every member's devices in.
            if placement.endToEnd { _ = try await sender.client.setUpIdentity() }
            // Members in requests of at most `addedAtOnce`, each well within a control frame.
            let names = (0..<pattern.members).map(member)
            let chunks = stride(from: 0, to: names.count, by: addedAtOnce).map { Array(names[$0..<min($0 + addedAtOnce, names.count)]) }
            try await sender.client.createGroup(name, members: chunks[0])
            for chunk in chunks.dropFirst() { try await sender.client.addToGroup(name, chunk) }
        } catch {
            await sender.client?.close()
            for receiver in receivers { await receiver.client.close() }
            throw error
        }
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured")
        let clock = LoadClock(pattern)
        let window = UsageWindow.measure(processes, after: pattern.warmup, seconds: pattern.duration)
        for receiver in receivers { try await receiver.count.start(clock).get() }
        var result = stored ? await sendAsync(sender.client, to: sender.to, members: pattern.members, pattern, clock)
                            : try await sender.start(clock).get()
        let expected = result.sent - result.failed
        for receiver in receivers { result.merge(try await receiver.count.settled(expecting: expected, until: clock.drainUntil).get()) }
        progress("done: \(result.sent) sent, \(result.accepted) accepted, \(result.deliveries) deliveries")
        result.measuredSeconds = pattern.duration
        let usage = await window.value.usage(messages: result.deliveriesInWindow)
        await sender.client.close()
        for receiver in receivers { await receiver.client.close() }
        return (result, usage)
    }

    /// The members, registered and connected, `connecting` at a time; each on its own loop of
    /// `loops`, round robin.
    private static func connectReceivers(_ count: Int, group: String, placement: Placement,
                                         loops: any EventLoopGroup) async throws -> [Receiver] {
        let receivers = (0..<count).map { _ in Receiver(group: group, loop: loops.next()) }
        do {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for (index, receiver) in receivers.enumerated() {
                    if index >= connecting { _ = try await tasks.next() }
                    tasks.addTask {
                        let client = try await SIMPLoad.connectedClient(member(index), placement.configuration(startingAt: index + 1),
                                                                        receiver.count.loop, eventHandler: receiver.handle)
                        // A member lets the sender (a stranger) add it at once: the run measures messages, not invitations.
                        try await client.set(.groupAdds(.everyone))
                        if placement.endToEnd { _ = try await client.setUpIdentity() }
                        try await receiver.count.loop.submit { receiver.client = client }.get()
                    }
                }
                try await tasks.waitForAll()
            }
        } catch {
            for receiver in receivers {
                let client = (try? await receiver.count.loop.submit { receiver.client as SIMPClient? }.get()) ?? nil
                await client?.close()
            }
            throw error
        }
        return receivers
    }

    /// The sender's messages in flight and its figures: a slot is freed by the group's
    /// accepted (or a failure before it), a message settles once accepted and confirmed by every
    /// member. Shared by `Sender` (on its client's loop) and `sendAsync` (a task).
    struct Book {
        private struct Pending {
            let sentAt: UInt64
            var accepted = false
            /// Members that will confirm it: known from the group's accepted.
            var recipients: Int
            var confirmed = 0
        }

        let members: Int
        var result = FanOutResult()
        /// Messages sent and not yet settled (accepted and confirmed by every member), by id.
        private var pending: [String: Pending] = [:]

        init(members: Int) { self.members = members }

        var isEmpty: Bool { pending.isEmpty }

        /// Counted as sent either way: a refused send is a failure, neither lost nor left out.
        mutating func sent(_ id: Result<String, any Error>, at start: UInt64) {
            result.sent += 1
            switch id {
            case .success(let id): pending[id] = Pending(sentAt: start, recipients: members)
            case .failure(let error): result.note(failure: "send: \(error)")
            }
        }

        /// Records `event`; true when it freed a slot (the message was accepted, or failed before).
        mutating func record(_ event: ClientEvent, to address: String, now: UInt64, _ clock: LoadClock) -> Bool {
            switch event {
            case .groupAccepted(let id, _, _, let recipients):
                return accepted(id, recipients: recipients, now, clock)
            case .accepted(let id, let to, _) where to == address:
                // A member's confirmation overtook the accepted notice: the library reports the
                // acceptance this way then, without the number of recipients.
                return accepted(id, recipients: nil, now, clock)
            case .memberDelivered(let id, _, _, _):
                guard var message = pending[id] else { return false }
                message.confirmed += 1
                settle(id, message, now, clock)
                return false
            case .failed(let id, _, let reason, _):
                guard let message = pending.removeValue(forKey: id) else { return false }
                result.note(failure: reason)
                // An accepted message's slot was freed already.
                return !message.accepted
            default:
                return false
            }
        }

        private mutating func accepted(_ id: String, recipients: Int?, _ now: UInt64, _ clock: LoadClock) -> Bool {
            guard var message = pending[id], !message.accepted else { return false }
            message.accepted = true
            if let recipients { message.recipients = recipients }
            result.accepted += 1
            if clock.measured(now) { result.acceptedInWindow += 1 }
            if clock.measured(message.sentAt) { _ = result.sendToAccepted.record(FanOutResult.micros(from: message.sentAt, to: now)) }
            settle(id, message, now, clock)
            return true
        }

        /// Forgets the message once it is accepted and every member confirmed it.
        private mutating func settle(_ id: String, _ message: Pending, _ now: UInt64, _ clock: LoadClock) {
            guard message.accepted, message.confirmed >= message.recipients else {
                pending[id] = message
                return
            }
            pending[id] = nil
            if clock.measured(message.sentAt) { _ = result.sendToAllDelivered.record(FanOutResult.micros(from: message.sentAt, to: now)) }
        }
    }

    /// The sender: keeps `window` messages not yet accepted in flight until the measured window
    /// ends, then waits until every one is confirmed by every member (or failed); the drain
    /// deadline ends the wait for whatever never settles. It lives on its client's event loop
    /// and gets the client's events there, like `SIMPLoad.Sender`.
    final class Sender: @unchecked Sendable {
        var client: SIMPClient!
        let to: String
        let pattern: FanOutPattern
        private var counter: UInt64 = 0
        private var clock: LoadClock?
        private var book: Book
        private var done: EventLoopPromise<FanOutResult>?

        init(to: String, members: Int, pattern: FanOutPattern) {
            self.to = to
            self.pattern = pattern
            book = Book(members: members)
        }

        /// Starts sending on the client's loop; succeeds once every message settled or the drain ended.
        func start(_ clock: LoadClock) -> EventLoopFuture<FanOutResult> {
            let loop = client.eventLoop
            return loop.flatSubmit { [self] in
                self.clock = clock
                let promise = loop.makePromise(of: FanOutResult.self)
                done = promise
                let drain = TimeAmount.nanoseconds(Int64(clock.drainUntil - min(clock.drainUntil, LoadClock.now())))
                loop.scheduleTask(in: drain) { [self] in finish() }
                for _ in 0..<pattern.window { sendOne() }
                return promise.futureResult
            }
        }

        func handle(_ event: ClientEvent) {
            guard let clock else { return }
            let now = LoadClock.now()
            if book.record(event, to: to, now: now, clock), now < clock.measureUntil { sendOne() }
            if now >= clock.measureUntil, book.isEmpty { finish() }
        }

        private func sendOne() {
            counter += 1
            let start = LoadClock.now()
            book.sent(Result { try client.post(to: to, text: SIMPLoad.text(counter, start, size: pattern.payloadBytes)) }, at: start)
        }

        /// Later events (a late confirmation, say) no longer count.
        private func finish() {
            clock = nil
            done?.succeed(book.result)
            done = nil
        }
    }

    /// The sender of a client with a data directory (`--data-dir`, `--e2e`), whose sends are
    /// `try await send` (each is on disk, and sealed, before it goes): as `Sender`, through
    /// the async API as `AsyncLoad` drives it, until every message settled or the drain ended.
    static func sendAsync(_ client: SIMPClient, to address: String, members: Int, _ pattern: FanOutPattern,
                          _ clock: LoadClock) async -> FanOutResult {
        await withTaskGroup(of: FanOutResult?.self) { tasks in
            tasks.addTask {
                var book = Book(members: members)
                var counter: UInt64 = 0
                func sendOne() async {
                    counter += 1
                    let start = LoadClock.now()
                    let text = SIMPLoad.text(counter, start, size: pattern.payloadBytes)
                    do {
                        book.sent(.success(try await client.send(to: address, text: text)), at: start)
                    } catch {
                        book.sent(.failure(error), at: start)
                    }
                }
                for _ in 0..<pattern.window { await sendOne() }
                await AsyncLoad.forEachEvent(of: client) { event in
                    let now = LoadClock.now()
                    if book.record(event, to: address, now: now, clock), now < clock.measureUntil { await sendOne() }
                    return now < clock.measureUntil || !book.isEmpty
                }
                return book.result
            }
            tasks.addTask {
                try? await Task.sleep(nanoseconds: clock.drainUntil - min(clock.drainUntil, LoadClock.now()))
                return nil
            }
            // Whichever ends first cancels the other; the sender's figures come either way.
            var result = FanOutResult()
            for await finished in tasks {
                tasks.cancelAll()
                if let finished { result = finished }
            }
            return result
        }
    }

    /// One member, on its client's loop: counts the group's messages.
    final class Receiver: @unchecked Sendable {
        var client: SIMPClient!
        let group: String
        let count: FanOutCount

        init(group: String, loop: any EventLoop) {
            self.group = group
            count = FanOutCount(loop: loop)
        }

        func handle(_ event: ClientEvent) {
            guard case .message(let message) = event, message.group == group,
                  let (counter, sentAt) = SIMPLoad.parse(message.text) else { return }
            count.receive(counter: counter, sentAt: sentAt)
        }
    }
}
