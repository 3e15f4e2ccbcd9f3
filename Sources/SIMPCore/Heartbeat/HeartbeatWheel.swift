import NIOConcurrencyHelpers
import NIOCore

/// The heartbeats of every control connection on one event loop, run from one repeating task
/// and a `DeadlineWheel` instead of two scheduled tasks per connection (what NIO's
/// `IdleStateHandler` costs). It ticks only while it watches a connection.
public final class HeartbeatWheel {
    public let loop: any EventLoop
    public let heartbeat: Heartbeat
    private var wheel: DeadlineWheel<UInt64>
    private var watched: [UInt64: any HeartbeatWatched] = [:]
    private var lastToken: UInt64 = 0
    private var ticking: RepeatedTask?

    public init(loop: any EventLoop, heartbeat: Heartbeat) {
        self.loop = loop
        self.heartbeat = heartbeat
        wheel = DeadlineWheel(resolution: heartbeat.resolution, now: loop.now)
    }

    public var watchedCount: Int { watched.count }

    /// Starts watching a connection that has just read and written (its times are now).
    func watch(_ connection: any HeartbeatWatched) -> UInt64 {
        loop.preconditionInEventLoop()
        lastToken += 1
        watched[lastToken] = connection
        let now = loop.now
        if ticking == nil { startTicking(now: now) }
        wheel.schedule(lastToken, at: now + min(heartbeat.interval, heartbeat.silenceLimit))
        return lastToken
    }

    func unwatch(_ token: UInt64) {
        loop.preconditionInEventLoop()
        guard watched.removeValue(forKey: token) != nil, watched.isEmpty else { return }
        ticking?.cancel()
        ticking = nil
    }

    private func startTicking(now: NIODeadline) {
        // Entries of connections gone while it was stopped would only be skipped; start afresh.
        wheel = DeadlineWheel(resolution: heartbeat.resolution, now: now)
        let bound = NIOLoopBound(self, eventLoop: loop)
        ticking = loop.scheduleRepeatedTask(initialDelay: heartbeat.resolution, delay: heartbeat.resolution) { _ in
            bound.value.tick()
        }
    }

    private func tick() {
        let now = loop.now
        for token in wheel.advance(to: now) {
            guard let connection = watched[token] else { continue }
            switch heartbeat.check(lastRead: connection.lastRead, lastWrite: connection.lastWrite, now: now) {
            case .wait(let until):
                wheel.schedule(token, at: until)
            case .ping(let next):
                wheel.schedule(token, at: next)
                connection.heartbeatDue(.write)
            case .close:
                unwatch(token)
                connection.heartbeatDue(.read)
            }
        }
    }
}

/// One `HeartbeatWheel` per event loop and heartbeat, made on first use on that loop.
public final class HeartbeatWheels: Sendable {
    private struct Entry {
        weak var loop: (any EventLoop)?
        var wheel: NIOLoopBound<HeartbeatWheel>
    }

    private struct Key: Hashable {
        var loop: ObjectIdentifier
        var heartbeat: Int64
    }

    private let wheels = NIOLockedValueBox([Key: Entry]())

    public init() {}

    /// The wheels of every client in this process.
    public static let shared = HeartbeatWheels()

    /// Call on `loop`.
    public func wheel(on loop: any EventLoop, heartbeat: Heartbeat) -> HeartbeatWheel {
        let key = Key(loop: ObjectIdentifier(loop), heartbeat: heartbeat.interval.nanoseconds)
        return wheels.withLockedValue { wheels in
            // A loop that has gone may leave its identifier to a new one: check it is the same.
            if let entry = wheels[key], entry.loop === loop, entry.wheel.value.heartbeat == heartbeat {
                return entry.wheel.value
            }
            wheels = wheels.filter { $0.value.loop != nil }
            let wheel = HeartbeatWheel(loop: loop, heartbeat: heartbeat)
            wheels[key] = Entry(loop: loop, wheel: NIOLoopBound(wheel, eventLoop: loop))
            return wheel
        }
    }
}

/// A connection a `HeartbeatWheel` watches: when it last read and wrote, and where its idle
/// events go.
public protocol HeartbeatWatched: AnyObject {
    var lastRead: NIODeadline { get }
    var lastWrite: NIODeadline { get }
    /// `.write` when a ping is due, `.read` when the peer has been silent too long.
    func heartbeatDue(_ event: IdleStateHandler.IdleStateEvent)
}

/// A connection's part of the heartbeat: its last read and write times and its place on the
/// wheel. Embedded in a handler that conforms to `HeartbeatWatched` (through `EnvelopeFraming`).
struct HeartbeatMarks {
    let wheel: HeartbeatWheel
    private(set) var lastRead = NIODeadline.distantPast
    private(set) var lastWrite = NIODeadline.distantPast
    private var token: UInt64?

    init(wheel: HeartbeatWheel) {
        self.wheel = wheel
    }

    mutating func read() {
        lastRead = wheel.loop.now
    }

    mutating func wrote() {
        lastWrite = wheel.loop.now
    }

    /// Call when the connection becomes active (again: it is watched once).
    mutating func start(_ connection: any HeartbeatWatched) {
        guard token == nil else { return }
        let now = wheel.loop.now
        lastRead = now
        lastWrite = now
        token = wheel.watch(connection)
    }

    mutating func stop() {
        guard let token else { return }
        self.token = nil
        wheel.unwatch(token)
    }
}
