import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// Redis Cluster for a whole process: one pipelined `RedisLoopConnection` per event loop and
/// per shard master. A pipeline is split by the slot of each command's first key into one
/// sub-pipeline per master (each keeping its commands' order), and the replies are put back
/// in the order of the commands. Commands without a key ride with the keyed command before
/// them (so a PUBLISH pipelined after a store reaches Redis after it), or go to any master.
///
/// The slot map is read (`CLUSTER SLOTS`) from the seeds on first use, and again after a
/// redirect or a broken connection. A MOVED reply moves that slot in the map at once and sends
/// the command again to the new master; ASK sends it once to the named node after ASKING. While
/// a loop's redirected commands are being sent again, that loop's later pipelines wait, so the
/// commands of one slot still reach Redis in the order they were made.
public final class RedisClusterPool: RedisClient {
    public let seeds: [RedisNodeAddress]
    private let template: RedisConfiguration
    private let state = NIOLockedValueBox(Shared())
    private let logger: Logger
    private let observeRoundTrip: RedisPool.RoundTripObserver?
    /// A redirected command is sent again at most this many times (a slot moving back and forth).
    static let maxRedirects = 5
    /// The map is read again at most this often, however many commands fail.
    static let refreshInterval = TimeAmount.milliseconds(100)

    private struct Shared {
        var map = RedisSlotMap()
        var refreshing: EventLoopFuture<RedisSlotMap>?
        var refreshScheduled = false
        var lastRefresh: NIODeadline?
        var lanes: [ObjectIdentifier: ClusterLane] = [:]
        var isShutDown = false
    }

    /// `seeds` are any nodes of the cluster; the first one's timeouts, user and password apply
    /// to every node (each node's connection logs in with them). A cluster has only database
    /// 0: the seeds' `database` is ignored.
    public init(seeds: [RedisConfiguration], logger: Logger = Logger(label: "simp.redis.cluster"),
                observeRoundTrip: RedisPool.RoundTripObserver? = nil) {
        precondition(!seeds.isEmpty, "a Redis Cluster needs at least one seed node")
        self.seeds = seeds.map { RedisNodeAddress(host: $0.host, port: $0.port) }
        var template = seeds[0]
        template.database = 0
        self.template = template
        self.logger = logger
        self.observeRoundTrip = observeRoundTrip
    }

    /// The slot map as last read or corrected by a MOVED.
    public var slotMap: RedisSlotMap { state.withLockedValue { $0.map } }

    public var scriptsCrossSlots: Bool { false }

    /// For tests: start from a map that may be wrong (redirects correct it).
    func replaceSlotMap(_ map: RedisSlotMap) {
        state.withLockedValue { $0.map = map }
    }

    public func run(_ commands: [RedisCommand], on loop: any EventLoop) -> EventLoopFuture<[RedisValue]> {
        run(commands, on: loop, waitingFor: nil)
    }

    /// With `wait`, every master that got some of the commands is sent WAIT right after them.
    public func run(_ commands: [RedisCommand], on loop: any EventLoop, waitingFor wait: RedisReplicaWait?) -> EventLoopFuture<[RedisValue]> {
        run(commands, wait, on: loop).map(\.replies)
    }

    public func run(_ commands: [RedisCommand], on loop: any EventLoop, countingReplicas wait: RedisReplicaWait) -> EventLoopFuture<[RedisReplicated]> {
        var counting = wait
        counting.counting = true
        return run(commands, counting, on: loop).map { answer in
            zip(answer.replies, answer.replicas).map { RedisReplicated(reply: $0, replicas: $1) }
        }
    }

    public func node(forKey key: String) -> RedisNodeAddress? {
        slotMap.master(forSlot: RedisCluster.hashSlot(key))
    }

    private func run(_ commands: [RedisCommand], _ wait: RedisReplicaWait?, on loop: any EventLoop) -> EventLoopFuture<Answer> {
        guard let lane = lane(for: loop) else {
            return loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down"))
        }
        guard loop.inEventLoop else { return loop.flatSubmit { self.enqueue(commands, wait, lane) } }
        return enqueue(commands, wait, lane)
    }

    /// The replies in the order of the commands, and (counting replicas) each one's node's WAIT.
    private struct Answer: Sendable {
        var replies: [RedisValue]
        var replicas: [Int64] = []
    }

    /// Read from the cluster each time, so a walk over every master (SCAN) misses none that
    /// took over since.
    public func masters(on loop: any EventLoop) -> EventLoopFuture<[RedisNodeAddress]> {
        guard let lane = lane(for: loop) else {
            return loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down"))
        }
        return refresh(on: lane).map { map in map.shards.map(\.master) }
    }

    public func master(forKey key: String, on loop: any EventLoop) -> EventLoopFuture<RedisNodeAddress> {
        guard let lane = lane(for: loop) else {
            return loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down"))
        }
        let slot = RedisCluster.hashSlot(key)
        return refresh(on: lane).flatMapThrowing { map in
            guard let master = map.master(forSlot: slot) else { throw RedisError(.notReady, "no master serves slot \(slot) in the Redis Cluster") }
            return master
        }
    }

    public func run(_ commands: [RedisCommand], at node: RedisNodeAddress, on loop: any EventLoop) -> EventLoopFuture<[RedisValue]> {
        guard let lane = lane(for: loop) else {
            return loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down"))
        }
        return loop.flatSubmit { lane.connection(to: node).run(commands) }
    }

    public func shutdown() async {
        let lanes = state.withLockedValue { shared -> [ClusterLane] in
            shared.isShutDown = true
            defer { shared.lanes.removeAll() }
            return Array(shared.lanes.values)
        }
        for lane in lanes {
            try? await lane.loop.flatSubmit { lane.closeAll() }.get()
        }
    }

    private func lane(for loop: any EventLoop) -> ClusterLane? {
        state.withLockedValue { shared in
            guard !shared.isShutDown else { return nil }
            let key = ObjectIdentifier(loop)
            if let known = shared.lanes[key], known.loop === loop { return known }
            let lane = ClusterLane(loop: loop, template: template, observeRoundTrip: observeRoundTrip)
            shared.lanes[key] = lane
            return lane
        }
    }

    // MARK: Order on one loop

    /// Runs the pipeline now, or after the loop's redirected commands (or the first map) are sent.
    private func enqueue(_ commands: [RedisCommand], _ wait: RedisReplicaWait?, _ lane: ClusterLane) -> EventLoopFuture<Answer> {
        if commands.isEmpty { return lane.loop.makeSucceededFuture(Answer(replies: [])) }
        if !lane.holding && state.withLockedValue({ $0.map.isEmpty }) { waitForMap(lane) }
        guard lane.holding else { return dispatch(commands, wait, lane) }
        let promise = lane.loop.makePromise(of: Answer.self)
        lane.held.append { self.dispatch(commands, wait, lane).cascade(to: promise) }
        return promise.futureResult
    }

    private func waitForMap(_ lane: ClusterLane) {
        lane.holding = true
        lane.awaitingMap = true
        refresh(on: lane).whenComplete { result in
            lane.awaitingMap = false
            if case .failure(let error) = result { lane.mapError = error as? RedisError }
            self.release(lane)
        }
    }

    /// Sends the held pipelines, in order, once nothing earlier is still in flight.
    private func release(_ lane: ClusterLane) {
        guard lane.holding, lane.inFlight == 0, !lane.awaitingMap else { return }
        lane.holding = false
        let waiting = lane.held
        lane.held = []
        var next = 0
        // (Sending never completes synchronously with a redirect, but if it ever held the loop
        // again, the rest would stay queued, ahead of anything queued meanwhile.)
        while next < waiting.count, !lane.holding {
            waiting[next]()
            next += 1
        }
        lane.held = Array(waiting[next...]) + lane.held
        lane.mapError = nil
    }

    // MARK: Split and reassemble

    private func dispatch(_ commands: [RedisCommand], _ wait: RedisReplicaWait?, _ lane: ClusterLane) -> EventLoopFuture<Answer> {
        let map = state.withLockedValue { $0.map }
        let groups: [(node: RedisNodeAddress, indices: [Int])]
        do {
            groups = try ClusterSplit.split(commands, by: map)
        } catch {
            if let mapError = lane.mapError { return lane.loop.makeFailedFuture(mapError) }
            refreshSoon()
            return lane.loop.makeFailedFuture(error)
        }
        lane.inFlight += 1
        let sent = groups.map { group in
            send(group.indices.map { commands[$0] }, to: group.node, lane, wait, redirects: 0)
        }
        return EventLoopFuture.whenAllComplete(sent, on: lane.loop).flatMapThrowing { results in
            lane.inFlight -= 1
            defer { self.release(lane) }
            guard wait?.counting == true else { return Answer(replies: try ClusterSplit.assemble(results, groups, count: commands.count)) }
            return try Self.counted(results, groups, count: commands.count)
        }
    }

    /// Each group's replies end with its node's WAIT: that count goes to each of its commands.
    private static func counted(_ results: [Result<[RedisValue], any Error>], _ groups: [(node: RedisNodeAddress, indices: [Int])],
                                count: Int) throws(RedisError) -> Answer {
        var replicas = [Int64](repeating: 0, count: count)
        let replies = results.enumerated().map { position, result in
            result.map { values in
                let acknowledged = RedisReplicaWait.acknowledged(values.last)
                for index in groups[position].indices { replicas[index] = acknowledged }
                return Array(values.dropLast())
            }
        }
        return Answer(replies: try ClusterSplit.assemble(replies, groups, count: count), replicas: replicas)
    }

    // MARK: One node, redirects

    private func send(_ commands: [RedisCommand], to node: RedisNodeAddress, _ lane: ClusterLane,
                      _ wait: RedisReplicaWait?, redirects: Int) -> EventLoopFuture<[RedisValue]> {
        guard !lane.closed else { return lane.loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down")) }
        let sent = wait.map { commands + [$0.command] } ?? commands
        return lane.connection(to: node).run(sent).flatMapError { error in
            // The node may be gone (a replica takes over): read the map again for later calls.
            self.logger.debug("Redis Cluster node failed", metadata: ["node": "\(node)", "error": "\(error)"])
            self.refreshSoon()
            return lane.loop.makeFailedFuture(error)
        }.flatMapThrowing { replies in
            try wait?.apply(replies) ?? replies
        }.flatMap { replies in
            self.followRedirects(commands, replies, lane, wait, redirects: redirects)
        }
    }

    private func followRedirects(_ commands: [RedisCommand], _ replies: [RedisValue], _ lane: ClusterLane,
                                 _ wait: RedisReplicaWait?, redirects: Int) -> EventLoopFuture<[RedisValue]> {
        guard redirects < Self.maxRedirects else { return lane.loop.makeSucceededFuture(replies) }
        let redirected = replies.indices.compactMap { index in RedisRedirect(replies[index]).map { (index, $0) } }
        guard !redirected.isEmpty else { return lane.loop.makeSucceededFuture(replies) }
        // This loop's later pipelines wait until these commands are sent again.
        lane.holding = true
        learn(redirected.map(\.1))
        let byNode = Self.group(redirected)
        let resent = byNode.map { group in
            resend(group.entries.map { ($0.redirect, commands[$0.index]) }, to: group.node, lane, wait, redirects: redirects + 1)
        }
        return EventLoopFuture.whenAllSucceed(resent, on: lane.loop).map { answers in
            var result = replies
            for (group, values) in zip(byNode, answers) {
                for (entry, value) in zip(group.entries, values) { result[entry.index] = value }
                // Counting: a command sent again counts the fewer of the two nodes' WAITs.
                if wait?.counting == true {
                    let fewer = min(RedisReplicaWait.acknowledged(result.last), RedisReplicaWait.acknowledged(values.last))
                    result[result.count - 1] = .integer(fewer)
                }
            }
            return result
        }
    }

    /// The redirected commands by the node they go to, in their order.
    private static func group(_ redirected: [(Int, RedisRedirect)]) -> [(node: RedisNodeAddress, entries: [(index: Int, redirect: RedisRedirect)])] {
        var byNode: [(node: RedisNodeAddress, entries: [(index: Int, redirect: RedisRedirect)])] = []
        for (index, redirect) in redirected {
            if let at = byNode.firstIndex(where: { $0.node == redirect.node }) {
                byNode[at].entries.append((index, redirect))
            } else {
                byNode.append((redirect.node, [(index, redirect)]))
            }
        }
        return byNode
    }

    /// An ASK redirect is answered by ASKING just before the command on the named node.
    private func resend(_ entries: [(RedisRedirect, RedisCommand)], to node: RedisNodeAddress, _ lane: ClusterLane,
                        _ wait: RedisReplicaWait?, redirects: Int) -> EventLoopFuture<[RedisValue]> {
        var commands: [RedisCommand] = []
        var indices: [Int] = []
        for (redirect, command) in entries {
            if case .ask = redirect { commands.append(RedisCommand("ASKING")) }
            indices.append(commands.count)
            commands.append(command)
        }
        let positions = indices
        let counting = wait?.counting == true
        return send(commands, to: node, lane, wait, redirects: redirects).map { replies in
            positions.map { replies[$0] } + (counting ? [replies[replies.count - 1]] : [])
        }
    }

    /// MOVED: the slot lives elsewhere from now on; the rest of the map may have changed too.
    private func learn(_ redirects: [RedisRedirect]) {
        var moved = false
        state.withLockedValue { shared in
            for case .moved(let slot, let node) in redirects {
                shared.map.move(slot: slot, to: node)
                moved = true
            }
        }
        if moved { refreshSoon() }
    }

    // MARK: The slot map

    /// Reads the map again in the background, at most once per `refreshInterval`.
    private func refreshSoon() {
        let (lane, delay) = state.withLockedValue { shared -> (ClusterLane?, TimeAmount?) in
            guard !shared.isShutDown, shared.refreshing == nil, !shared.refreshScheduled, let lane = shared.lanes.values.first else { return (nil, nil) }
            shared.refreshScheduled = true
            let earliest = (shared.lastRefresh ?? .uptimeNanoseconds(0)) + Self.refreshInterval
            return (lane, max(.nanoseconds(0), earliest - .now()))
        }
        guard let lane, let delay else { return }
        lane.loop.scheduleTask(in: delay) {
            self.state.withLockedValue { $0.refreshScheduled = false }
            _ = self.refresh(on: lane)
        }.futureResult.whenFailure { _ in
            // The loop shut down: let another loop schedule it.
            self.state.withLockedValue { $0.refreshScheduled = false }
        }
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers (known masters, then replicas,
    /// then the seeds). Concurrent callers share one read. Completes on `lane.loop`.
    private func refresh(on lane: ClusterLane) -> EventLoopFuture<RedisSlotMap> {
        let future = state.withLockedValue { shared -> EventLoopFuture<RedisSlotMap> in
            if let running = shared.refreshing { return running }
            let promise = lane.loop.makePromise(of: RedisSlotMap.self)
            let published = promise.futureResult.map { map -> RedisSlotMap in
                self.publish(map)
                return map
            }.flatMapErrorThrowing { error in
                self.state.withLockedValue { shared in
                    shared.refreshing = nil
                    shared.lastRefresh = .now()
                }
                throw error
            }
            shared.refreshing = published
            var seen = Set<RedisNodeAddress>()
            let candidates = (shared.map.nodes + seeds).filter { seen.insert($0).inserted }
            lane.loop.execute { self.readMap(from: candidates[...], lane, lastError: nil).cascade(to: promise) }
            return published
        }
        return future.hop(to: lane.loop)
    }

    /// Called with the lock released (a future's callback), never inside `state`'s lock.
    private func publish(_ map: RedisSlotMap) {
        state.withLockedValue { shared in
            shared.map = map
            shared.refreshing = nil
            shared.lastRefresh = .now()
        }
    }

    private func readMap(from candidates: ArraySlice<RedisNodeAddress>, _ lane: ClusterLane,
                         lastError: RedisError?) -> EventLoopFuture<RedisSlotMap> {
        guard !lane.closed else { return lane.loop.makeFailedFuture(RedisError(.closed, "redis pool is shut down")) }
        guard let node = candidates.first else {
            let reason = lastError.map { ": \($0.message)" } ?? ""
            return lane.loop.makeFailedFuture(RedisError(lastError?.kind ?? .connectionFailed, "no Redis Cluster node answered CLUSTER SLOTS\(reason)"))
        }
        return lane.connection(to: node).run([RedisCommand("CLUSTER", ["SLOTS"])]).flatMapThrowing { replies in
            let map = try RedisSlotMap(clusterSlots: replies[0].checked(), asked: node)
            guard !map.isEmpty else { throw RedisError(.notReady, "\(node) knows no slots yet") }
            return map
        }.flatMapError { error in
            let failure = error as? RedisError ?? RedisError(.io, "\(error)")
            return self.readMap(from: candidates.dropFirst(), lane, lastError: failure)
        }
    }
}

/// One event loop's connections to the cluster, one per node, and the order-keeping state of
/// that loop. Confined to `loop`.
final class ClusterLane: @unchecked Sendable {
    let loop: any EventLoop
    private let template: RedisConfiguration
    private let observeRoundTrip: RedisPool.RoundTripObserver?
    private var connections: [RedisNodeAddress: RedisLoopConnection] = [:]
    /// Pipelines sent and not yet answered (including redirected commands sent again).
    var inFlight = 0
    /// True while later pipelines must wait: redirected commands are being sent again, or the
    /// first map is being read.
    var holding = false
    var awaitingMap = false
    /// Why the map could not be read, for the pipelines that waited for it.
    var mapError: RedisError?
    var held: [() -> Void] = []
    private(set) var closed = false

    init(loop: any EventLoop, template: RedisConfiguration, observeRoundTrip: RedisPool.RoundTripObserver?) {
        self.loop = loop
        self.template = template
        self.observeRoundTrip = observeRoundTrip
    }

    func connection(to node: RedisNodeAddress) -> RedisLoopConnection {
        loop.preconditionInEventLoop()
        if let known = connections[node] { return known }
        var configuration = template
        configuration.host = node.host
        configuration.port = node.port
        let connection = RedisLoopConnection(loop: loop, configuration: configuration, observeRoundTrip: observeRoundTrip)
        connections[node] = connection
        return connection
    }

    /// Closes every connection; held pipelines are sent now and fail as closed.
    func closeAll() -> EventLoopFuture<Void> {
        closed = true
        let open = Array(connections.values)
        connections = [:]
        let waiting = held
        held = []
        for release in waiting { release() }
        return EventLoopFuture.andAllComplete(open.map { $0.close() }, on: loop)
    }
}

/// The pure part of running a pipeline on a cluster: which master gets which commands, and
/// the replies put back in the order of the commands.
enum ClusterSplit {
    /// Which master gets which commands, in the order of the commands.
    static func split(_ commands: [RedisCommand], by map: RedisSlotMap) throws(RedisError) -> [(node: RedisNodeAddress, indices: [Int])] {
        var targets: [RedisNodeAddress?] = []
        targets.reserveCapacity(commands.count)
        for command in commands {
            guard case .slot(let slot) = command.route else { targets.append(nil); continue }
            guard let master = map.master(forSlot: slot) else {
                throw RedisError(.notReady, map.isEmpty ? "no Redis Cluster slot map yet" : "no master serves slot \(slot) in the Redis Cluster")
            }
            targets.append(master)
        }
        // A keyless command rides with the keyed one before it, else the one after it.
        let fallback = targets.first(where: { $0 != nil }) ?? map.shards.first?.master
        guard let fallback else { throw RedisError(.notReady, "no Redis Cluster slot map yet") }
        var previous = fallback
        var groups: [(node: RedisNodeAddress, indices: [Int])] = []
        var position: [RedisNodeAddress: Int] = [:]
        for (index, target) in targets.enumerated() {
            let node = target ?? previous
            previous = node
            if let at = position[node] {
                groups[at].indices.append(index)
            } else {
                position[node] = groups.count
                groups.append((node, [index]))
            }
        }
        return groups
    }

    /// The replies in the order of the commands. When a shard failed, the whole pipeline fails
    /// with its error, marked "may have run" when any of it was sent.
    static func assemble(_ results: [Result<[RedisValue], any Error>], _ groups: [(node: RedisNodeAddress, indices: [Int])],
                         count: Int) throws(RedisError) -> [RedisValue] {
        var replies = [RedisValue](repeating: .null, count: count)
        var failure: RedisError?
        var anySent = false
        for (result, group) in zip(results, groups) {
            switch result {
            case .success(let values):
                anySent = true
                for (index, value) in zip(group.indices, values) { replies[index] = value }
            case .failure(let error):
                let redisError = error as? RedisError ?? RedisError(.io, "\(error)", mayHaveRun: true)
                anySent = anySent || redisError.mayHaveRun
                if failure == nil { failure = redisError }
            }
        }
        if var failure {
            failure.mayHaveRun = anySent
            throw failure
        }
        return replies
    }
}
