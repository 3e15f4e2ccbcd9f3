import Foundation

/// What the spawned servers counted over a run, read from their Prometheus endpoints (summed
/// over the nodes): how much was sent again for what was stored.
public struct ServerCounters: Sendable, Codable {
    /// Messages stored in recipients' inboxes (`simp_messages_stored_total`).
    public var stored: Int
    /// Messages pushed to recipients (`simp_pushes_total`).
    public var pushes: Int
    /// Pushes sent again, on a timeout or a receipt's `missing` (`simp_retransmits_total`).
    public var pushRetransmits: Int
    /// Messages a sender sent again that the server had already stored (`simp_messages_duplicate_total`).
    public var senderResends: Int

    /// Push retransmits plus sender resends per stored message.
    public var retransmitsPerStored: Double {
        Double(pushRetransmits + senderResends) / Double(max(stored, 1))
    }

    /// Reads and sums the counters of every endpoint (HOST:PORT); nil when one cannot be read.
    public static func scrape(_ addresses: [String]) -> ServerCounters? {
        guard !addresses.isEmpty else { return nil }
        var total = ServerCounters(stored: 0, pushes: 0, pushRetransmits: 0, senderResends: 0)
        for address in addresses {
            guard let text = fetch("http://\(address)/metrics") else { return nil }
            let values = parse(text)
            total.stored += values["simp_messages_stored_total"] ?? 0
            total.pushes += values["simp_pushes_total"] ?? 0
            total.pushRetransmits += values["simp_retransmits_total"] ?? 0
            total.senderResends += values["simp_messages_duplicate_total"] ?? 0
        }
        return total
    }

    /// Unlabelled samples of the exposition format: `name value`.
    static func parse(_ text: String) -> [String: Int] {
        var values: [String: Int] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, !fields[0].contains("{"), let value = Double(fields[1]) else { continue }
            values[String(fields[0])] = Int(value)
        }
        return values
    }

    /// The endpoint's text, by curl (Foundation's URLSession needs FoundationNetworking).
    private static func fetch(_ url: String) -> String? {
        guard let curl = try? Spawn.executable("curl") else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments = ["-sf", "--max-time", "10", url]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}

/// `--busy-loops N`: N processes that only burn CPU (`yes > /dev/null`), for the length of a
/// run, so the server, Redis and the bench share the cores with them.
public final class BusyLoops: @unchecked Sendable {
    private let processes: [Process]

    public init(_ count: Int) throws {
        let yes = try Spawn.executable("yes")
        processes = try (0..<count).map { _ in try Spawn.launch(yes, [], stdout: FileHandle.nullDevice) }
    }

    public func stop() async {
        await Spawn.terminate(processes)
    }
}
