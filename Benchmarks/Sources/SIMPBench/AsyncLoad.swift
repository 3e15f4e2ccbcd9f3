import MQTTLoad
import NIOCore
import SIMPClient

/// The pattern of `SIMPLoad`, driven through the library as applications use it: `events`
/// read with `for await`, `try await send`, one task per side of each conversation, on
/// Swift's own executors, or with `onClientLoop` on each client's event loop
/// (`SIMPClient.taskExecutor`). Its figures beside `SIMPLoad`'s show what that path costs.
public enum AsyncLoad {
    public static func run(_ pattern: LoadPattern, placement: Placement, group: any EventLoopGroup,
                           processes: ProcessGroups, batched: Bool = false, onClientLoop: Bool = false,
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> LoadResult {
        progress("connecting \(pattern.pairs * 2) clients (async API\(onClientLoop ? ", tasks on the clients' loops" : "")) to \(placement.nodes.map(\.description).joined(separator: ", "))")
        var pairs: [(sender: SIMPClient, receiver: SIMPClient)] = []
        for i in 0..<pattern.pairs {
            var senderConfiguration = placement.sender(pair: i)
            var receiverConfiguration = placement.receiver(pair: i)
            senderConfiguration.eventBatches = batched
            receiverConfiguration.eventBatches = batched
            let sender = try await SIMPLoad.connectedClient("bench-s\(i)", senderConfiguration, group)
            let receiver = try await SIMPLoad.connectedClient("bench-r\(i)", receiverConfiguration, group)
            // Identities and KeyPackages first: the first send makes the conversation's group.
            if placement.endToEnd {
                _ = try await receiver.setUpIdentity()
                _ = try await sender.setUpIdentity()
            }
            pairs.append((sender, receiver))
        }
        progress("running: \(pattern.warmup) s warm-up, \(pattern.duration) s measured")
        let clock = LoadClock(pattern)
        let window = UsageWindow.measure(processes, after: pattern.warmup, seconds: pattern.duration)
        var result = LoadResult()
        await withTaskGroup(of: LoadResult.self) { tasks in
            for (i, pair) in pairs.enumerated() {
                tasks.addTask { await conversation(pair.sender, to: "bench-r\(i)", receiver: pair.receiver,
                                                   counter: UInt64(i) << 40, onClientLoop: onClientLoop, pattern, clock) }
            }
            for await pairResult in tasks { result.merge(pairResult) }
        }
        progress("done: \(result.sent) sent, \(result.received) received")
        result.measuredSeconds = pattern.duration
        result.usage = await window.value.usage(messages: result.receivedInWindow)
        for pair in pairs {
            await pair.sender.close()
            await pair.receiver.close()
        }
        return result
    }

    /// One pair: the receiver's task reads its events until the sender's task is done (every
    /// message settled, or the drain deadline passed), then the pair's figures are counted.
    static func conversation(_ sender: SIMPClient, to user: String, receiver: SIMPClient, counter: UInt64,
                             onClientLoop: Bool, _ pattern: LoadPattern, _ clock: LoadClock) async -> LoadResult {
        let receiving = Task(executorPreference: onClientLoop ? receiver.taskExecutor : nil) { await receive(receiver, clock) }
        var sent = await withTaskGroup(of: LoadResult?.self) { tasks in
            tasks.addTask(executorPreference: onClientLoop ? sender.taskExecutor : nil) {
                await send(sender, to: user, counter: counter, pattern, clock)
            }
            tasks.addTask {
                try? await Task.sleep(nanoseconds: clock.drainUntil - min(clock.drainUntil, LoadClock.now()))
                return nil
            }
            // Whichever ends first cancels the other; the sender's figures come either way.
            var sent = LoadResult()
            for await finished in tasks {
                tasks.cancelAll()
                if let finished { sent = finished }
            }
            return sent
        }
        receiving.cancel()
        let received = await receiving.value
        sent.lost = max(0, sent.sent - sent.failed - received.received)
        sent.merge(received)
        return sent
    }

    /// Keeps `pattern.window` messages in flight until the measured window ends, then waits
    /// for the rest to settle; cancelled at the drain deadline, when its `for await` ends.
    static func send(_ client: SIMPClient, to user: String, counter: UInt64,
                     _ pattern: LoadPattern, _ clock: LoadClock) async -> LoadResult? {
        var outbox = AsyncOutbox(client: client, to: user, counter: counter, size: pattern.payloadBytes)
        for _ in 0..<pattern.window { await outbox.sendOne() }
        await forEachEvent(of: client) { event in
            let now = LoadClock.now()
            guard outbox.settle(event, now: now, clock) else { return true }
            if now < clock.measureUntil { await outbox.sendOne() }
            return now < clock.measureUntil || !outbox.sentAt.isEmpty
        }
        return outbox.result
    }

    /// Hands each of the client's events to `body` until it says stop (false): from
    /// `eventBatches` when the client delivers them so, else from `events`.
    static func forEachEvent(of client: SIMPClient, _ body: (ClientEvent) async -> Bool) async {
        guard client.configuration.eventBatches else {
            for await event in client.events { guard await body(event) else { return } }
            return
        }
        for await batch in client.eventBatches {
            for event in batch { guard await body(event) else { return } }
        }
    }

    static func receive(_ client: SIMPClient, _ clock: LoadClock) async -> LoadResult {
        var counters = Set<UInt64>()
        var result = LoadResult()
        var retracted = 0
        await forEachEvent(of: client) { event in
            if case .retracted = event { retracted += 1 }
            guard case .message(let message) = event, let (counter, sentAt) = SIMPLoad.parse(message.text) else { return true }
            let now = LoadClock.now()
            guard counters.insert(counter).inserted else {
                result.duplicates += 1
                return true
            }
            if clock.measured(sentAt) { _ = result.sendToReceive.record((now - sentAt) / 1000) }
            return true
        }
        result.received = counters.count - retracted
        return result
    }
}

/// A sender's messages in flight and its figures so far.
struct AsyncOutbox {
    let client: SIMPClient
    let to: String
    var counter: UInt64
    let size: Int
    var result = LoadResult()
    var sentAt: [String: UInt64] = [:]

    init(client: SIMPClient, to: String, counter: UInt64, size: Int) {
        self.client = client
        self.to = to
        self.counter = counter
        self.size = size
    }

    mutating func sendOne() async {
        counter += 1
        let start = LoadClock.now()
        result.sent += 1
        do {
            sentAt[try await client.send(to: to, text: SIMPLoad.text(counter, start, size: size))] = start
        } catch {
            note(failure: "send: \(error)")
        }
    }

    /// Records the event; true when it settled a message of this sender (delivered or failed).
    mutating func settle(_ event: ClientEvent, now: UInt64, _ clock: LoadClock) -> Bool {
        switch event {
        case .accepted(let id, _, _):
            if let start = sentAt[id], clock.measured(start) { _ = result.sendToAccepted.record((now - start) / 1000) }
            return false
        case .delivered(let id, _, _):
            guard let start = sentAt.removeValue(forKey: id) else { return false }
            if clock.measured(start) { _ = result.sendToDelivered.record((now - start) / 1000) }
            return true
        case .failed(let id, _, let reason, _):
            guard sentAt.removeValue(forKey: id) != nil else { return false }
            note(failure: reason)
            return true
        default:
            return false
        }
    }

    private mutating func note(failure: String) {
        result.failed += 1
        if result.failures.count < 5 { result.failures.append(failure) }
    }
}
