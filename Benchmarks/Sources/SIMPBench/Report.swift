import Foundation
import Histogram
import MQTTLoad

/// One system's figures for a pattern, ready to print or encode.
public struct SystemReport: Sendable, Codable {
    public var system: String
    public var messagesPerSecond: Double
    public var sent: Int
    public var received: Int
    public var lost: Int
    public var duplicates: Int
    public var failed: Int
    public var failures: [String]
    /// Percentiles in microseconds: p50, p90, p99, p99.9, max.
    public var sendToReceive: Percentiles
    public var sendToAccepted: Percentiles?
    public var sendToDelivered: Percentiles?
    public var usage: [String: ProcessUsage]

    public init(system: String, _ result: LoadResult, accepted: Bool = true, delivered: Bool = true) {
        self.system = system
        messagesPerSecond = result.messagesPerSecond
        sent = result.sent
        received = result.received
        lost = result.lost
        duplicates = result.duplicates
        failed = result.failed
        failures = result.failures
        sendToReceive = Percentiles(result.sendToReceive)
        sendToAccepted = accepted ? Percentiles(result.sendToAccepted) : nil
        sendToDelivered = delivered ? Percentiles(result.sendToDelivered) : nil
        usage = result.usage
    }
}

public struct Percentiles: Sendable, Codable {
    public var count: UInt64
    public var p50: UInt64
    public var p90: UInt64
    public var p99: UInt64
    public var p999: UInt64
    public var max: UInt64

    public init(_ histogram: Histogram<UInt64>) {
        count = histogram.totalCount
        p50 = histogram.valueAtPercentile(50)
        p90 = histogram.valueAtPercentile(90)
        p99 = histogram.valueAtPercentile(99)
        p999 = histogram.valueAtPercentile(99.9)
        max = histogram.max
    }
}

/// The SIMP deployment measured: its nodes and, when the bench spawned it, its Redis.
public struct Topology: Sendable, Codable, CustomStringConvertible {
    public var nodes: Int
    /// "single" (one redis-server) or "cluster"; nil for servers the bench did not start.
    public var redis: String?
    public var redisMasters: Int?
    public var redisReplicas: Int?
    public var minReplicas: Int?
    /// Receivers took messages before they were stored (`--early`).
    public var earlyDelivery: Bool?

    public init(nodes: Int, redis: String? = nil, redisMasters: Int? = nil, redisReplicas: Int? = nil, minReplicas: Int? = nil,
                earlyDelivery: Bool = false) {
        self.earlyDelivery = earlyDelivery ? true : nil
        self.nodes = nodes
        self.redis = redis
        self.redisMasters = redisMasters
        self.redisReplicas = redisReplicas
        self.minReplicas = minReplicas
    }

    public func withEarlyDelivery(_ early: Bool) -> Topology {
        var topology = self
        topology.earlyDelivery = early ? true : nil
        return topology
    }

    /// "3 nodes, Redis Cluster 3 masters + 3 replicas, min-replicas 1".
    public var description: String {
        let nodes = self.nodes == 1 ? "1 node" : "\(self.nodes) nodes"
        let minReplicas = (self.minReplicas.map { ", min-replicas \($0)" } ?? "") + (earlyDelivery == true ? ", early delivery" : "")
        switch redis {
        case "cluster":
            return "\(nodes), Redis Cluster \(redisMasters ?? 0) masters + \(redisReplicas ?? 0) replicas\(minReplicas)"
        case "single":
            return "\(nodes), one redis-server\(minReplicas)"
        default:
            return "\(nodes) (--server), Redis not known"
        }
    }
}

/// A report as one JSON object, keys sorted (both modes' reports).
public protocol JSONReport: Encodable {}

extension JSONReport {
    public func json() -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

public struct BenchReport: Sendable, Codable, JSONReport {
    public var pattern: LoadPattern
    /// SIMP's deployment (Mosquitto, when compared, is one broker).
    public var topology: Topology?
    public var systems: [SystemReport]
    /// The table's first line when the pattern is not pairs in flight (`--long-messages`).
    public var title: String?

    public init(pattern: LoadPattern, topology: Topology? = nil, systems: [SystemReport], title: String? = nil) {
        self.pattern = pattern
        self.topology = topology
        self.systems = systems
        self.title = title
    }


    /// A table with one column per system and, with two systems, the ratio of the first to the second.
    public func table() -> String {
        var rows: [(String, [String])] = []
        func row(_ name: String, _ value: (SystemReport) -> String) { rows.append((name, systems.map(value))) }
        row("delivered msg/s") { String(format: "%.0f", $0.messagesPerSecond) }
        for (name, pick) in [("send->receive", { (s: SystemReport) in s.sendToReceive as Percentiles? }),
                             ("send->accepted", { $0.sendToAccepted }), ("send->delivered", { $0.sendToDelivered })] {
            row("\(name) p50/p90/p99 ms") { pick($0).map { Self.millis($0.p50, $0.p90, $0.p99) } ?? "-" }
            row("\(name) p99.9/max ms") { pick($0).map { Self.millis($0.p999, $0.max) } ?? "-" }
        }
        row("sent/received") { "\($0.sent)/\($0.received)" }
        row("lost/dup/failed") { "\($0.lost)/\($0.duplicates)/\($0.failed)" }
        for (name, values) in Self.usageRows(systems.map(\.usage)) { rows.append((name, values)) }
        var header = ["", ] + systems.map(\.system)
        if systems.count == 2 { header.append("\(systems[0].system)/\(systems[1].system)") }
        var lines = [header]
        for (name, values) in rows {
            var line = [name] + values
            if systems.count == 2 { line.append(ratio(name)) }
            lines.append(line)
        }
        let p = pattern
        let title = self.title ?? "\(p.pairs) pairs x \(p.window) in flight, \(p.payloadBytes)-byte texts, \(Self.seconds(p.duration)) s measured after \(Self.seconds(p.warmup)) s warm-up"
        return title + (topology.map { "\nSIMP: \($0)" } ?? "") + "\n" + Self.align(lines)
    }

    /// Per process (bench, server, redis): cores and CPU per message, RSS, and for Redis the
    /// script calls per message and the time inside them; one value per system.
    static func usageRows(_ usages: [[String: ProcessUsage]]) -> [(String, [String])] {
        var rows: [(String, [String])] = []
        for process in Set(usages.flatMap(\.keys)).sorted() {
            let name = processLabel(process, usages)
            let each = usages.map { $0[process] }
            rows.append(("\(name) cores, us/msg", each.map { u in u.map { String(format: "%.2f, %.1f", $0.cores, $0.microsPerMessage) } ?? "-" }))
            rows.append(("\(name) RSS MiB", each.map { u in u.map { String(format: "%.1f", Double($0.rssBytes) / 1_048_576) } ?? "-" }))
            guard each.contains(where: { $0?.scriptsPerMessage != nil }) else { continue }
            rows.append(("\(name) scripts/msg, us in them", each.map { u in
                guard let calls = u?.scriptsPerMessage, let micros = u?.microsInScriptsPerMessage else { return "-" }
                return String(format: "%.2f, %.1f", calls, micros)
            }))
        }
        return rows
    }

    /// "server (3 processes)" when a figure sums several processes; "server (3/1 processes)"
    /// when the systems differ (in column order).
    static func processLabel(_ process: String, _ usages: [[String: ProcessUsage]]) -> String {
        let counts = usages.compactMap { $0[process]?.processes }
        guard counts.contains(where: { $0 > 1 }) else { return process }
        let shown = Set(counts).count == 1 ? "\(counts[0])" : counts.map(String.init).joined(separator: "/")
        return "\(process) (\(shown) processes)"
    }

    private func ratio(_ row: String) -> String {
        let a = systems[0], b = systems[1]
        switch row {
        case "delivered msg/s":
            return b.messagesPerSecond > 0 ? String(format: "%.2fx", a.messagesPerSecond / b.messagesPerSecond) : "-"
        case "send->receive p50/p90/p99 ms":
            return Self.ratios(a.sendToReceive, b.sendToReceive)
        case "send->accepted p50/p90/p99 ms":
            guard let x = a.sendToAccepted, let y = b.sendToAccepted else { return "" }
            return Self.ratios(x, y)
        case "send->delivered p50/p90/p99 ms":
            guard let x = a.sendToDelivered, let y = b.sendToDelivered else { return "" }
            return Self.ratios(x, y)
        default:
            return ""
        }
    }

    static func ratios(_ a: Percentiles, _ b: Percentiles) -> String {
        [(a.p50, b.p50), (a.p90, b.p90), (a.p99, b.p99)]
            .map { $0.1 > 0 ? String(format: "%.2fx", Double($0.0) / Double($0.1)) : "-" }.joined(separator: "/")
    }

    public static func millis(_ values: UInt64...) -> String {
        values.map { String(format: "%.2f", Double($0) / 1000) }.joined(separator: "/")
    }

    static func seconds(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    static func align(_ lines: [[String]]) -> String {
        let widths = (0..<(lines.map(\.count).max() ?? 0)).map { column in
            lines.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return lines.map { line in
            line.enumerated().map { column, cell in
                column == 0 ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
