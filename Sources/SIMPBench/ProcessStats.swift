#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// CPU time and resident memory of a process, read from /proc (Linux), or the sum over
/// several processes.
public struct ProcessSample: Sendable {
    public var cpuSeconds: Double
    public var rssBytes: Int
    public var processes = 1

    public init(cpuSeconds: Double, rssBytes: Int, processes: Int = 1) {
        self.cpuSeconds = cpuSeconds
        self.rssBytes = rssBytes
        self.processes = processes
    }

    /// nil for no samples.
    public static func sum(_ samples: [ProcessSample]) -> ProcessSample? {
        guard !samples.isEmpty else { return nil }
        return ProcessSample(cpuSeconds: samples.map(\.cpuSeconds).reduce(0, +), rssBytes: samples.map(\.rssBytes).reduce(0, +),
                             processes: samples.map(\.processes).reduce(0, +))
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

    public init(from start: ProcessSample, to end: ProcessSample, seconds: Double, messages: Int) {
        let cpu = max(0, end.cpuSeconds - start.cpuSeconds)
        cores = seconds > 0 ? cpu / seconds : 0
        microsPerMessage = messages > 0 ? cpu * 1_000_000 / Double(messages) : 0
        rssBytes = end.rssBytes
        processes = end.processes
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
            let starts = groups.map { $0.pids.map(ProcessSample.read) }
            try? await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
            var window = UsageWindow(seconds: seconds)
            for ((name, pids), start) in zip(groups, starts) {
                // Only processes seen at both ends count (one gone by the end has no figure).
                let both = zip(start, pids.map(ProcessSample.read)).compactMap { start, end -> (ProcessSample, ProcessSample)? in
                    guard let start, let end else { return nil }
                    return (start, end)
                }
                guard let start = ProcessSample.sum(both.map(\.0)), let end = ProcessSample.sum(both.map(\.1)) else { continue }
                window.samples[name] = (start, end)
            }
            return window
        }
    }

    public func usage(messages: Int) -> [String: ProcessUsage] {
        samples.mapValues { ProcessUsage(from: $0.start, to: $0.end, seconds: seconds, messages: messages) }
    }
}
