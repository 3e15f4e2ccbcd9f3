import Foundation
import MQTTLoad

/// One system's figures for the chat pattern, ready to print or encode.
public struct ChatSystemReport: Sendable, Codable {
    public var system: String
    /// Messages sent, and distinct messages received, while the window lasted, per second.
    public var sentPerSecond: Double
    public var receivedPerSecond: Double
    public var sentInWindow: Int
    public var receivedInWindow: Int
    /// The whole run, after the drain.
    public var sent: Int
    public var received: Int
    public var lost: Int
    public var duplicates: Int
    public var failed: Int
    public var failures: [String]
    /// Besides failed messages: connections lost, malformed packets.
    public var errors: [String]
    public var disconnects: Int
    /// Percentiles in microseconds, of the messages sent in the window.
    public var sendToReceive: Percentiles
    /// To SIMP's accepted, or to MQTT's PUBACK.
    public var sendToAccepted: Percentiles
    /// To SIMP's delivered (nil for the broker).
    public var sendToDelivered: Percentiles?
    /// How late the bench sent against its own schedule.
    public var sendLag: Percentiles
    /// CPU microseconds per message received in the window (`microsPerMessage`).
    public var usage: [String: ProcessUsage]
    /// The server's (or broker's) growth in RSS from before the first login to the window's end, per session.
    public var serverBytesPerSession: Int?
    /// What the spawned servers counted (SIMP with `--spawn` only).
    public var serverCounters: ServerCounters?

    public init(system: String, _ run: ChatRun, delivered: Bool) {
        let result = run.result
        let seconds = max(result.measuredSeconds, 1e-9)
        self.system = system
        sentPerSecond = Double(result.sentInWindow) / seconds
        receivedPerSecond = Double(result.receivedInWindow) / seconds
        sentInWindow = result.sentInWindow
        receivedInWindow = result.receivedInWindow
        sent = result.sent
        received = result.received
        lost = result.lost
        duplicates = result.duplicates
        failed = result.failed
        failures = result.failures
        errors = result.errors
        disconnects = result.disconnects
        sendToReceive = Percentiles(result.sendToReceive)
        sendToAccepted = Percentiles(result.sendToAccepted)
        sendToDelivered = delivered ? Percentiles(result.sendToDelivered) : nil
        sendLag = Percentiles(result.sendLag)
        usage = run.usage
        serverBytesPerSession = run.serverBytesPerSession
    }

    public var healthy: Bool { lost == 0 && duplicates == 0 }

    func micros(_ process: String) -> Double? { usage[process]?.microsPerMessage }
}

/// With two systems, the first against the second (SIMP/Mosquitto).
public struct ChatRatios: Sendable, Codable {
    /// The server's CPU per message against the broker's.
    public var serverMicrosPerMessage: Double?
    /// The server's and Redis's together against the broker's: what SIMP's durable inbox costs too.
    public var serverAndRedisMicrosPerMessage: Double?
    public var sendToReceiveP99: Double?

    init(_ a: ChatSystemReport, _ b: ChatSystemReport) {
        let broker = b.micros("server")
        serverMicrosPerMessage = Self.ratio(a.micros("server"), broker)
        serverAndRedisMicrosPerMessage = Self.ratio(a.micros("server").map { $0 + (a.micros("redis") ?? 0) }, broker)
        sendToReceiveP99 = Self.ratio(Double(a.sendToReceive.p99), Double(b.sendToReceive.p99))
    }

    private static func ratio(_ a: Double?, _ b: Double?) -> Double? {
        guard let a, let b, b > 0 else { return nil }
        return a / b
    }
}

public struct ChatBenchReport: Sendable, Codable, JSONReport {
    /// "chat", so a reader of the JSON tells it from the other patterns' reports.
    public var mode = "chat"
    public var pattern: ChatPattern
    public var offeredPerSecond: Double
    /// SIMP's deployment (Mosquitto, when compared, is one broker).
    public var topology: Topology?
    /// Processes that only burned CPU beside the run (`--busy-loops`).
    public var busyLoops: Int
    public var systems: [ChatSystemReport]
    public var ratios: ChatRatios?

    public init(pattern: ChatPattern, topology: Topology? = nil, busyLoops: Int = 0, systems: [ChatSystemReport]) {
        self.pattern = pattern
        self.busyLoops = busyLoops
        offeredPerSecond = pattern.offeredRate
        self.topology = topology
        self.systems = systems
        ratios = systems.count == 2 ? ChatRatios(systems[0], systems[1]) : nil
    }

    public var healthy: Bool { systems.allSatisfy(\.healthy) }

    /// A table with one column per system, then the ratios.
    public func table() -> String {
        var lines = [[""] + systems.map(\.system)]
        func row(_ name: String, _ value: (ChatSystemReport) -> String) { lines.append([name] + systems.map(value)) }
        row("sent/received msg/s") { String(format: "%.0f/%.0f", $0.sentPerSecond, $0.receivedPerSecond) }
        row("sent/received in window") { "\($0.sentInWindow)/\($0.receivedInWindow)" }
        row("send->receive p50/p99/p99.9 ms") { BenchReport.millis($0.sendToReceive.p50, $0.sendToReceive.p99, $0.sendToReceive.p999) }
        row("send->receive max ms") { BenchReport.millis($0.sendToReceive.max) }
        row("send->accepted p50/p99 ms") { BenchReport.millis($0.sendToAccepted.p50, $0.sendToAccepted.p99) }
        row("send->delivered p50/p99 ms") { s in s.sendToDelivered.map { BenchReport.millis($0.p50, $0.p99) } ?? "-" }
        row("bench send lag p50/p99/max ms") { BenchReport.millis($0.sendLag.p50, $0.sendLag.p99, $0.sendLag.max) }
        row("sent/received (whole run)") { "\($0.sent)/\($0.received)" }
        row("lost/dup/failed") { "\($0.lost)/\($0.duplicates)/\($0.failed)" }
        row("connections lost") { "\($0.disconnects)" }
        for (name, values) in BenchReport.usageRows(systems.map(\.usage)) { lines.append([name] + values) }
        row("server RSS per session KiB") { s in s.serverBytesPerSession.map { String(format: "%.1f", Double($0) / 1024) } ?? "-" }
        if systems.contains(where: { $0.serverCounters != nil }) {
            row("stored/pushed (server)") { s in s.serverCounters.map { "\($0.stored)/\($0.pushes)" } ?? "-" }
            row("push retransmits/sender resends") { s in s.serverCounters.map { "\($0.pushRetransmits)/\($0.senderResends)" } ?? "-" }
            row("retransmits per stored message") { s in s.serverCounters.map { String(format: "%.3f", $0.retransmitsPerStored) } ?? "-" }
        }
        return ([title] + (topology.map { ["SIMP: \($0)"] } ?? []) + [BenchReport.align(lines)] + ratioLines() + problems())
            .joined(separator: "\n")
    }

    /// The first failures and errors of each system, so a bad run says why.
    private func problems() -> [String] {
        systems.flatMap { system in
            (system.failures + system.errors).map { "\(system.system): \($0)" }
                + (system.lost > 0 ? [lateOrLost(system)] : [])
        }
    }

    /// Nothing tells a message still on its way from one that never will arrive but time.
    private func lateOrLost(_ system: ChatSystemReport) -> String {
        "\(system.system): \(system.lost) messages not received by the end of the "
            + "\(BenchReport.seconds(pattern.drain)) s drain (a longer --drain tells late from lost)"
    }

    private var title: String {
        let p = pattern
        return "chat: \(p.sessions) users x \(p.rate) msg/s = \(String(format: "%.0f", p.offeredRate)) msg/s offered, "
            + "\(p.payloadBytes)-byte texts, \(BenchReport.seconds(p.duration)) s measured after \(BenchReport.seconds(p.warmup)) s warm-up"
            + (p.contacts.map { ", \($0) contacts each" } ?? "")
            + (busyLoops > 0 ? ", \(busyLoops) busy loop\(busyLoops == 1 ? "" : "s") beside it" : "")
    }

    private func ratioLines() -> [String] {
        guard let ratios, systems.count == 2 else { return [] }
        let names = "\(systems[0].system)/\(systems[1].system)"
        let format = { (value: Double?) in value.map { String(format: "%.2fx", $0) } ?? "-" }
        return ["\(names): server CPU per message \(format(ratios.serverMicrosPerMessage))"
                + " (server + Redis \(format(ratios.serverAndRedisMicrosPerMessage))),"
                + " send->receive p99 \(format(ratios.sendToReceiveP99))"]
    }
}
