import NIOCore
import SIMPClient

/// What N connected, idle clients cost: the server's memory per session and CPU at rest, and
/// the client library's CPU at rest, all sharing one process and event loop group.
public struct IdleReport: Sendable, Codable {
    public var clients: Int
    public var seconds: Double
    public var usage: [String: ProcessUsage]
    /// Growth of the server's RSS (all nodes') from before the first client to after the last, per session.
    public var serverBytesPerSession: Int?
    /// The same for this process, per client.
    public var benchBytesPerClient: Int?

    public func table() -> String {
        var lines = ["\(clients) idle clients, \(Int(seconds)) s measured"]
        for (name, use) in usage.sorted(by: { $0.key < $1.key }) {
            let processes = use.processes > 1 ? " (\(use.processes) processes)" : ""
            lines.append("\(name)\(processes): \(String(format: "%.2f", use.cores * 100))% of a core, RSS \(use.rssBytes / 1024) KiB")
        }
        if let bytes = serverBytesPerSession { lines.append("server RSS per session: \(bytes / 1024) KiB (\(bytes) bytes)") }
        if let bytes = benchBytesPerClient { lines.append("bench RSS per client: \(bytes / 1024) KiB (\(bytes) bytes)") }
        return lines.joined(separator: "\n")
    }
}

public enum IdleLoad {
    /// The users are bench-idleN for N from `first`.
    /// Client N starts on node N % nodes (see `Placement`).
    public static func run(clients count: Int, from first: Int = 0, seconds: Double, placement: Placement,
                           group: any EventLoopGroup,
                           processes: ProcessGroups,
                           progress: @Sendable (String) -> Void = { _ in }) async throws -> IdleReport {
        let before = processes.map { ProcessSample.sum($0.pids.compactMap(ProcessSample.read))?.rssBytes }
        progress("connecting \(count) clients")
        let clients = try await connectAll(first..<(first + count), placement, group)
        // Let logins, binds and presence writes settle before measuring rest.
        try await Task.sleep(for: .seconds(2))
        progress("measuring \(seconds) s at rest")
        let window = await UsageWindow.measure(processes, after: 0, seconds: seconds).value
        var report = IdleReport(clients: count, seconds: seconds, usage: window.usage(messages: 0))
        for ((name, _), start) in zip(processes, before) {
            guard let start, let end = window.samples[name]?.end.rssBytes else { continue }
            let perClient = (end - start) / max(1, count)
            if name == "server" { report.serverBytesPerSession = perClient }
            if name == "bench" { report.benchBytesPerClient = perClient }
        }
        for client in clients { await client.close() }
        return report
    }

    /// 32 at a time: each registers and logs in (scrypt on the server), then binds its UDP path.
    /// In the order of `users`; user i is `name(i)`, its events go to `eventHandler(i)`.
    static func connectAll(_ users: Range<Int>, _ placement: Placement, _ group: any EventLoopGroup,
                           name: (Int) -> String = { "bench-idle\($0)" },
                           eventHandler: (Int) -> (@Sendable (ClientEvent) -> Void)? = { _ in nil }) async throws -> [SIMPClient] {
        var clients: [SIMPClient] = []
        var next = users.lowerBound
        while next < users.upperBound {
            let range = next..<min(users.upperBound, next + 32)
            next = range.upperBound
            try await withThrowingTaskGroup(of: (Int, SIMPClient).self) { tasks in
                for i in range {
                    let (user, configuration, handler) = (name(i), placement.configuration(startingAt: i), eventHandler(i))
                    tasks.addTask { (i, try await SIMPLoad.connectedClient(user, configuration, group, eventHandler: handler)) }
                }
                var batch: [(Int, SIMPClient)] = []
                for try await connected in tasks { batch.append(connected) }
                clients += batch.sorted { $0.0 < $1.0 }.map(\.1)
            }
        }
        return clients
    }
}
