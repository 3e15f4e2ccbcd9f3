import NIOCore

/// What an application holds of a client: its events, each consumer with a stream and a
/// bounded buffer of its own, and the connection's state.
extension SIMPClient {
    /// How many events a stream keeps for a consumer that has not taken them yet, unless told
    /// otherwise: 10,000.
    public static let defaultEventBuffer = 10_000

    /// A stream of every event from now on, for one consumer: each call makes a new one, and
    /// every stream gets every event, whatever the others do.
    ///
    /// At most `limit` events wait in it. When its consumer falls further behind, the oldest
    /// are dropped and the consumer next gets one `.eventsDropped(count:)` in their place: the
    /// application then reads what it missed from the local history (`conversations()`,
    /// `messages(in:)`) and the statuses (`status(of:to:)`). The
    /// stream ends at `close()`; it stops taking events (and holds none) once its consumer's
    /// task is cancelled or the stream and its iterator are released.
    public func events(bufferingNewest limit: Int = SIMPClient.defaultEventBuffer) -> AsyncStream<ClientEvent> {
        hub.events(limit: limit)
    }

    /// The events a loop turn made, together, for a consumer that takes many at a time; each
    /// call makes a new stream. At most `limit` batches wait; when more come, the oldest are
    /// dropped and the next batch is one `.eventsDropped(count:)`, counting the events dropped.
    public func eventBatches(bufferingNewest limit: Int = SIMPClient.defaultEventBuffer) -> AsyncStream<[ClientEvent]> {
        hub.batches(limit: limit)
    }

    /// One stream made with the client, like `events()`, with the default buffer. Without an
    /// `eventHandler` or `configuration.eventBatches`, it has every event from the client's
    /// start; otherwise it is made at its first use and has the events from then on. Two
    /// consumers of this one stream split its events: each consumer should call `events()`.
    public var events: AsyncStream<ClientEvent> {
        defaultEvents.withLock { stream in
            if let stream { return stream }
            let made = hub.events(limit: Self.defaultEventBuffer)
            stream = made
            return made
        }
    }

    /// One stream of batches made with the client, like `eventBatches()`: from the client's
    /// start with `configuration.eventBatches`, else from its first use.
    public var eventBatches: AsyncStream<[ClientEvent]> {
        defaultBatches.withLock { stream in
            if let stream { return stream }
            let made = hub.batches(limit: Self.defaultEventBuffer)
            stream = made
            return made
        }
    }

    /// Where the connection stands now, readable from any thread.
    public var connectionState: ConnectionState { hub.connectionState }

    /// The connection's state now, then each change, for one consumer (each call makes a new
    /// stream). A consumer that falls behind gets the latest 16 changes. Ends at `close()`.
    public func connectionStates() -> AsyncStream<ConnectionState> {
        hub.states()
    }

    // MARK: cancellation

    /// What `promise` gives; when the awaiting task is cancelled, `ClientError.cancelled` at
    /// once, and `onCancel` runs (to tell the engine, or stop the work).
    func untilCancelled<Value: Sendable>(_ promise: EventLoopPromise<Value>,
                                         onCancel: @escaping @Sendable () -> Void = {}) async throws -> Value {
        try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            promise.fail(ClientError.cancelled)
            onCancel()
        }
    }

    /// Requests on the control connection the engine waits an answer for.
    func pendingRequests() async -> Int {
        (try? await loop.submit { [self] in engine.pendingRequests.count }.get()) ?? 0
    }
}
