import Foundation
import MQTTLoad

/// One system's figures for the group fan-out, ready to print or encode.
public struct GroupSystemReport: Sendable, Codable {
    public var system: String
    /// Messages received in the measured window, summed over the receivers, per second.
    public var deliveriesPerSecond: Double
    /// Messages the server (or broker) took for every receiver in the measured window, per second.
    public var acceptedPerSecond: Double
    public var sent: Int
    public var accepted: Int
    /// Distinct messages received over the whole run, summed over the receivers.
    public var deliveries: Int
    public var lost: Int
    public var duplicates: Int
    public var failed: Int
    public var failures: [String]
    /// Percentiles in microseconds: p50, p90, p99, p99.9, max.
    public var sendToReceive: Percentiles
    /// To SIMP's group accepted, or to MQTT's PUBACK.
    public var sendToAccepted: Percentiles
    /// To the last member's confirmation (SIMP only).
    public var sendToAllDelivered: Percentiles?
    /// CPU microseconds per delivery in the window (`microsPerMessage`).
    public var usage: [String: ProcessUsage]

    public init(system: String, _ result: FanOutResult, usage: [String: ProcessUsage], allDelivered: Bool) {
        self.system = system
        deliveriesPerSecond = result.deliveriesPerSecond
        acceptedPerSecond = result.acceptedPerSecond
        sent = result.sent
        accepted = result.accepted
        deliveries = result.deliveries
        lost = result.lost
        duplicates = result.duplicates
        failed = result.failed
        failures = result.failures
        sendToReceive = Percentiles(result.sendToReceive)
        sendToAccepted = Percentiles(result.sendToAccepted)
        sendToAllDelivered = allDelivered ? Percentiles(result.sendToAllDelivered) : nil
        self.usage = usage
    }
}

public struct GroupBenchReport: Sendable, Codable, JSONReport {
    /// "group fan-out", so a reader of the JSON tells it from the pairs' report.
    public var mode = "group fan-out"
    public var pattern: FanOutPattern
    /// SIMP's deployment (Mosquitto, when compared, is one broker).
    public var topology: Topology?
    public var systems: [GroupSystemReport]

    public init(pattern: FanOutPattern, topology: Topology? = nil, systems: [GroupSystemReport]) {
        self.pattern = pattern
        self.topology = topology
        self.systems = systems
    }


    /// A table with one column per system and, with two systems, the ratio of the first to the second.
    public func table() -> String {
        let compared = systems.count == 2
        var lines = [[""] + systems.map(\.system) + (compared ? ["\(systems[0].system)/\(systems[1].system)"] : [])]
        func row(_ name: String, ratio: ((GroupSystemReport, GroupSystemReport) -> String)? = nil, _ value: (GroupSystemReport) -> String) {
            lines.append([name] + systems.map(value) + (compared ? [ratio.map { $0(systems[0], systems[1]) } ?? ""] : []))
        }
        row("deliveries/s", ratio: { Self.ratio($0.deliveriesPerSecond, $1.deliveriesPerSecond) }) { String(format: "%.0f", $0.deliveriesPerSecond) }
        row("accepted msg/s", ratio: { Self.ratio($0.acceptedPerSecond, $1.acceptedPerSecond) }) { String(format: "%.0f", $0.acceptedPerSecond) }
        for (name, pick) in [("send->receive", { (s: GroupSystemReport) in s.sendToReceive as Percentiles? }),
                             ("send->accepted", { $0.sendToAccepted }), ("send->all delivered", { $0.sendToAllDelivered })] {
            row("\(name) p50/p90/p99 ms", ratio: { a, b in
                guard let x = pick(a), let y = pick(b) else { return "" }
                return BenchReport.ratios(x, y)
            }) { pick($0).map { BenchReport.millis($0.p50, $0.p90, $0.p99) } ?? "-" }
            row("\(name) p99.9/max ms") { pick($0).map { BenchReport.millis($0.p999, $0.max) } ?? "-" }
        }
        row("sent/accepted") { "\($0.sent)/\($0.accepted)" }
        row("deliveries (whole run)") { "\($0.deliveries)" }
        row("lost/dup/failed") { "\($0.lost)/\($0.duplicates)/\($0.failed)" }
        for process in Set(systems.flatMap { $0.usage.keys }).sorted() {
            let name = BenchReport.processLabel(process, systems.map(\.usage))
            row("\(name) cores, us/delivery") { s in
                s.usage[process].map { String(format: "%.2f, %.2f", $0.cores, $0.microsPerMessage) } ?? "-"
            }
            row("\(name) RSS MiB") { s in s.usage[process].map { String(format: "%.1f", Double($0.rssBytes) / 1_048_576) } ?? "-" }
        }
        let p = pattern
        let title = "group fan-out: 1 sender to \(p.members) members, \(p.window) in flight, \(p.payloadBytes)-byte texts, "
            + "\(BenchReport.seconds(p.duration)) s measured after \(BenchReport.seconds(p.warmup)) s warm-up"
        return title + (topology.map { "\nSIMP: \($0)" } ?? "") + "\n" + BenchReport.align(lines)
    }

    private static func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.2fx", a / b) : "-" }
}
