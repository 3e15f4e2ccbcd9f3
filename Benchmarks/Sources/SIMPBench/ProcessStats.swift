#if canImport(Glibc)
import Glibc
#endif
import Foundation
import SIMPTestSupport

/// CPU time and resident memory of a process, read from /proc (Linux), or the sum over
/// several processes.
public struct ProcessSample: Sendable {
    public var cpuSeconds: Double
    public var rssBytes: Int
    public var processes = 1
    /// A Redis process's script calls so far; nil for other processes.
    public var scripts: ScriptCounts?

    public init(cpuSeconds: Double, rssBytes: Int, processes: Int = 1) {
        self.cpuSeconds = cpuSeconds
        self.rssBytes = rssBytes
        self.processes = processes
    }

    /// nil for no samples.
    public static func sum(_ samples: [ProcessSample]) -> ProcessSample? {
        guard !samples.isEmpty else { return nil }
        var sum = ProcessSample(cpuSeconds: samples.map(\.cpuSeconds).reduce(0, +), rssBytes: samples.map(\.rssBytes).reduce(0, +),
                                processes: samples.map(\.processes).reduce(0, +))
        let scripts = samples.compactMap(\.scripts)
        if scripts.count == samples.count {
            sum.scripts = ScriptCounts(calls: scripts.map(\.calls).reduce(0, +), micros: scripts.map(\.micros).reduce(0, +))
        }
        return sum
    }

    /// nil when the process is gone or /proc cannot be read.
    public static func read(pid: Int32) -> ProcessSample? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        // The command name (field 2) may hold spaces; fields are counted after its closing parenthesis.
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ProcessSample(cpuSeconds: (user + system) / ticks, rssBytes: residentBytes(status))
    }

    private static func residentBytes(_ status: String) -> Int {
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kib = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return kib * 1024
        }
        return 0
    }
}

/// What a process, or a group of them (all servers, all Redis nodes), used between two samples.
public struct ProcessUsage: Sendable, Codable {
    /// Cores busy on average over the window (1.0 = one core all the time).
    public var cores: Double
    /// CPU microseconds per message delivered in the window.
    public var microsPerMessage: Double
    public var rssBytes: Int
    /// How many processes the figures sum.
    public var processes: Int
    /// Redis only: script calls per message, and the microseconds Redis spent inside them per
    /// message (the rest of its CPU is reading, replying, the AOF and waking up).
    public var scriptsPerMessage: Double?
    public var microsInScriptsPerMessage: Double?

    public init(from start: ProcessSample, to end: ProcessSample, seconds: Double, messages: Int) {
        let cpu = max(0, end.cpuSeconds - start.cpuSeconds)
        cores = seconds > 0 ? cpu / seconds : 0
        microsPerMessage = messages > 0 ? cpu * 1_000_000 / Double(messages) : 0
        rssBytes = end.rssBytes
        processes = end.processes
        if let first = start.scripts, let last = end.scripts, messages > 0 {
            scriptsPerMessage = Double(max(0, last.calls - first.calls)) / Double(messages)
            microsInScriptsPerMessage = Double(max(0, last.micros - first.micros)) / Double(messages)
        }
    }
}

/// Named groups of processes ("server": every simp-server), each summed in the report.
public typealias ProcessGroups = [(name: String, pids: [Int32])]

/// Samples named groups of processes at the start and the end of a measured window that
/// begins `after` seconds from now and lasts `seconds`.
public struct UsageWindow: Sendable {
    public var samples: [String: (start: ProcessSample, end: ProcessSample)] = [:]
    public var seconds: Double

    public static func measure(_ groups: ProcessGroups, after: Double, seconds: Double) -> Task<UsageWindow, Never> {
        Task {
            try? await Task.sleep(nanoseconds: UInt64(after * 1e9))
            var starts: [[ProcessSample?]] = []
            for group in groups { starts.append(samples(group)) }
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            var window = UsageWindow(seconds: seconds)
            for (group, start) in zip(groups, starts) {
                let name = group.name
                // Only processes seen at both ends count (one gone by the end has no figure).
                let both = zip(start, samples(group)).compactMap { start, end -> (ProcessSample, ProcessSample)? in
                    guard let start, let end else { return nil }
                    return (start, end)
                }
                guard let start = ProcessSample.sum(both.map(\.0)), let end = ProcessSample.sum(both.map(\.1)) else { continue }
                window.samples[name] = (start, end)
            }
            return window
        }
    }

    /// Each process's sample; Redis' with its script calls.
    private static func samples(_ group: (name: String, pids: [Int32])) -> [ProcessSample?] {
        var samples: [ProcessSample?] = []
        for pid in group.pids {
            var sample = ProcessSample.read(pid: pid)
            if group.name == "redis" { sample?.scripts = ScriptCounts.read(redis: pid) }
            samples.append(sample)
        }
        return samples
    }

    public func usage(messages: Int) -> [String: ProcessUsage] {
        samples.mapValues { ProcessUsage(from: $0.start, to: $0.end, seconds: seconds, messages: messages) }
    }
}

/// A Redis process's script calls (EVALSHA, EVAL, FCALL and their read-only forms) and the microseconds spent inside
/// them, the commands they run included, from `INFO commandstats`.
public struct ScriptCounts: Sendable, Equatable {
    public var calls: Int
    public var micros: Int

    /// nil when the port cannot be told or Redis gives no answer (a password, say). Asked over
    /// a socket of its own: Foundation's `Process.run` crashed the bench in a chat run, with
    /// thousands of client sockets open.
    static func read(redis pid: Int32) -> ScriptCounts? {
        guard let port = port(redis: pid) else { return nil }
        let text = redisReply(port: port, ["INFO", "commandstats"])
        guard text.contains("cmdstat_") else { return nil }
        return parse(text)
    }

    /// Redis shows its address in its process title: "redis-server 127.0.0.1:6379".
    static func port(redis pid: Int32) -> Int? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
        let title = String(decoding: data, as: UTF8.self)
        for word in title.split(whereSeparator: { $0 == " " || $0 == "\0" }) {
            if let colon = word.lastIndex(of: ":"), let port = Int(word[word.index(after: colon)...]) { return port }
        }
        return nil
    }

    static let scriptCommands: Set<String> = ["cmdstat_evalsha", "cmdstat_eval", "cmdstat_fcall",
                                              "cmdstat_evalsha_ro", "cmdstat_eval_ro", "cmdstat_fcall_ro"]

    /// Lines such as `cmdstat_evalsha:calls=6489,usec=643941,usec_per_call=99.24,...`.
    static func parse(_ text: String) -> ScriptCounts {
        var counts = ScriptCounts(calls: 0, micros: 0)
        for line in text.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":"),
                  Self.scriptCommands.contains(String(line[..<colon])) else { continue }
            for field in line[line.index(after: colon)...].split(separator: ",") {
                let pair = field.split(separator: "=", maxSplits: 1)
                guard pair.count == 2, let value = Int(pair[1]) else { continue }
                if pair[0] == "calls" { counts.calls += value }
                if pair[0] == "usec" { counts.micros += value }
            }
        }
        return counts
    }
}
