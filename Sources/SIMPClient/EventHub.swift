import Foundation

/// One consumer's events, bounded: at most `limit` wait for it. When one more comes, the
/// oldest is dropped and counted; the consumer's next element is then `overflow(count)`, in
/// place of what it missed, before the oldest kept. One consumer (one iterator) at a time.
final class BoundedBuffer<Element: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var queue: [Element] = []
    /// Where the queue starts (dropping from the front moves it instead of shifting).
    private var head = 0
    private var dropped = 0
    private var waiter: CheckedContinuation<Element?, Never>?
    private var finished = false
    let limit: Int
    /// How many events an element holds (a batch, several), for the count of dropped ones.
    private let weight: @Sendable (Element) -> Int
    private let overflow: @Sendable (Int) -> Element

    init(limit: Int, weight: @escaping @Sendable (Element) -> Int, overflow: @escaping @Sendable (Int) -> Element) {
        self.limit = max(1, limit)
        self.weight = weight
        self.overflow = overflow
    }

    /// How many wait, the overflow count not included.
    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return queue.count - head
    }

    func push(_ element: Element) {
        lock.lock()
        if finished {
            lock.unlock()
            return
        }
        if let waiter {
            self.waiter = nil
            lock.unlock()
            return waiter.resume(returning: element)
        }
        if queue.count - head >= limit {
            dropped += weight(queue[head])
            head += 1
            if head >= limit {
                queue.removeFirst(head)
                head = 0
            }
        }
        queue.append(element)
        lock.unlock()
    }

    /// The next element; nil once finished and empty.
    func next() async -> Element? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Element?, Never>) in
            lock.lock()
            if dropped > 0 {
                let count = dropped
                dropped = 0
                lock.unlock()
                return continuation.resume(returning: overflow(count))
            }
            if head < queue.count {
                let element = queue[head]
                head += 1
                if head == queue.count {
                    queue.removeAll(keepingCapacity: true)
                    head = 0
                }
                lock.unlock()
                return continuation.resume(returning: element)
            }
            if finished {
                lock.unlock()
                return continuation.resume(returning: nil)
            }
            let earlier = waiter
            waiter = continuation
            lock.unlock()
            earlier?.resume(returning: nil)
        }
    }

    /// No more elements: what waits is still handed over, then the end. With `discard`
    /// (the consumer went away), what waits is dropped.
    func finish(discard: Bool = false) {
        lock.lock()
        finished = true
        if discard {
            queue.removeAll()
            head = 0
            dropped = 0
        }
        let waiter = self.waiter
        self.waiter = nil
        lock.unlock()
        waiter?.resume(returning: nil)
    }
}

/// The subscribers of a client's events, each with a stream and a bounded buffer of its own:
/// every one gets every event. Events are published on the client's loop; streams are made
/// and dropped on any thread.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var eventBuffers: [UInt64: BoundedBuffer<ClientEvent>] = [:]
    private var batchBuffers: [UInt64: BoundedBuffer<[ClientEvent]>] = [:]
    private var stateSinks: [UInt64: AsyncStream<ConnectionState>.Continuation] = [:]
    private var state = ConnectionState.disconnected
    private var nextID: UInt64 = 0
    private var closed = false
    /// The events of this loop turn, for the batch subscribers. Confined to the client's loop.
    private var pending: [ClientEvent] = []

    var connectionState: ConnectionState {
        lock.lock()
        defer { lock.unlock() }
        return state
    }

    var subscriberCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return eventBuffers.count + batchBuffers.count
    }

    func events(limit: Int) -> AsyncStream<ClientEvent> {
        let buffer = BoundedBuffer<ClientEvent>(limit: limit, weight: { _ in 1 }, overflow: { ClientEvent.eventsDropped(count: $0) })
        let id = subscribe { hub, id in hub.eventBuffers[id] = buffer }
        if id == nil { buffer.finish() }
        return Self.stream(of: buffer) { [weak self] in
            guard let id else { return }
            self?.unsubscribe { $0.eventBuffers[id] = nil }
        }
    }

    func batches(limit: Int) -> AsyncStream<[ClientEvent]> {
        let buffer = BoundedBuffer<[ClientEvent]>(limit: limit, weight: { $0.count }, overflow: { [ClientEvent.eventsDropped(count: $0)] })
        let id = subscribe { hub, id in hub.batchBuffers[id] = buffer }
        if id == nil { buffer.finish() }
        return Self.stream(of: buffer) { [weak self] in
            guard let id else { return }
            self?.unsubscribe { $0.batchBuffers[id] = nil }
        }
    }

    /// A new subscriber's id, after `add` put it in (nil once closed: nothing is added).
    private func subscribe(_ add: (EventHub, UInt64) -> Void) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return nil }
        let id = nextID
        nextID += 1
        add(self, id)
        return id
    }

    private func unsubscribe(_ remove: (EventHub) -> Void) {
        lock.lock()
        remove(self)
        lock.unlock()
    }

    /// A stream reading `buffer`, subscribed until its consumer's task is cancelled or the
    /// stream and its iterator are gone (then `remove` runs, once).
    private static func stream<Element>(of buffer: BoundedBuffer<Element>,
                                        remove: @escaping @Sendable () -> Void) -> AsyncStream<Element> {
        let subscription = Subscription {
            buffer.finish(discard: true)
            remove()
        }
        return AsyncStream(unfolding: { [subscription] in
            let element = await buffer.next()
            _ = subscription
            return element
        }, onCancel: {
            subscription.end()
        })
    }

    func states() -> AsyncStream<ConnectionState> {
        let (stream, sink) = AsyncStream.makeStream(of: ConnectionState.self, bufferingPolicy: .bufferingNewest(16))
        lock.lock()
        let id = nextID
        nextID += 1
        sink.yield(state)
        if closed { sink.finish() } else { stateSinks[id] = sink }
        lock.unlock()
        sink.onTermination = { [weak self] _ in
            guard let self else { return }
            lock.lock()
            stateSinks[id] = nil
            lock.unlock()
        }
        return stream
    }

    /// On the client's loop. True when the batch subscribers are to be flushed at the turn's end.
    func publish(_ event: ClientEvent) -> Bool {
        lock.lock()
        let buffers = eventBuffers.values
        let batching = !batchBuffers.isEmpty
        lock.unlock()
        for buffer in buffers { buffer.push(event) }
        guard batching else { return false }
        pending.append(event)
        return pending.count == 1
    }

    /// On the client's loop: the turn's events, to each batch subscriber.
    func flushBatch() {
        guard !pending.isEmpty else { return }
        lock.lock()
        let buffers = batchBuffers.values
        lock.unlock()
        for buffer in buffers { buffer.push(pending) }
        pending.removeAll(keepingCapacity: true)
    }

    func publish(_ new: ConnectionState) {
        lock.lock()
        defer { lock.unlock() }
        guard new != state else { return }
        state = new
        for sink in stateSinks.values { sink.yield(new) }
    }

    /// Ends every stream; what they hold is still handed over. Streams made later end at once.
    func finish() {
        flushBatch()
        lock.lock()
        closed = true
        let buffers = eventBuffers.values
        let batches = batchBuffers.values
        let sinks = stateSinks.values
        eventBuffers.removeAll()
        batchBuffers.removeAll()
        stateSinks.removeAll()
        lock.unlock()
        for buffer in buffers { buffer.finish() }
        for buffer in batches { buffer.finish() }
        for sink in sinks { sink.finish() }
    }
}

/// Ends a subscription once: when its consumer's task is cancelled, or when the stream that
/// holds it is released.
private final class Subscription: Sendable {
    private let ending: Locked<(@Sendable () -> Void)?>

    init(_ end: @escaping @Sendable () -> Void) {
        ending = Locked(end)
    }

    func end() {
        let end = ending.exchange(nil)
        end?()
    }

    deinit { end() }
}
