import Foundation
@testable import SIMPClient
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Issue 44: an encrypted text never appears in the server's memory (the same search a core
/// dump would allow) nor in its debug log. A `simp-server` process at debug log level relays an encrypted
/// conversation between two clients of this process; then every writable mapping of the server
/// process (`/proc/PID/maps`, read through `/proc/PID/mem`, which a parent may read) is
/// searched for the texts. The sender's name and a group's name, which the server must hold, are found by the same search: it would find a text that were there.
@Suite struct ServerMemoryTests {
    /// How often each of `needles` is in the writable mappings of `pid`, read one region at a time.
    static func searchMemory(of pid: pid_t, for needles: [[UInt8]]) throws -> [Int] {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let memory = open("/proc/\(pid)/mem", O_RDONLY)
        guard memory >= 0 else { throw TestSupportError("cannot open /proc/\(pid)/mem: errno \(errno)") }
        defer { close(memory) }
        var hits = [Int](repeating: 0, count: needles.count)
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            // Writable mappings: the heap, the stacks, what the process allocated (a text it got
            // would be there; the read-only ones are its files as they came from disk).
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            let range = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
            guard range.count == 2, range[1] > range[0] else { continue }
            var bytes = [UInt8](repeating: 0, count: Int(range[1] - range[0]))
            let read = bytes.withUnsafeMutableBytes { pread(memory, $0.baseAddress, $0.count, off_t(Int64(bitPattern: range[0]))) }
            guard read > 0 else { continue }
            for (index, needle) in needles.enumerated() { hits[index] += Self.count(needle, in: bytes, upTo: read) }
        }
        return hits
    }

    /// Occurrences of `needle` in the first `length` bytes of `haystack`, by Foundation's search
    /// (compiled optimized: the regions run to hundreds of megabytes).
    static func count(_ needle: [UInt8], in haystack: [UInt8], upTo length: Int) -> Int {
        let hay = Data(haystack[0..<length])
        let pin = Data(needle)
        var found = 0
        var from = hay.startIndex
        while let hit = hay.range(of: pin, in: from..<hay.endIndex) {
            found += 1
            from = hit.lowerBound + 1
        }
        return found
    }

    @Test(.enabled(if: getuid() == 0, "needs root to read another process's memory"))
    func anEncryptedTextIsNowhereInTheServersMemory() async throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url, extra: ["--log-level", "debug"])
        let directories = (0..<2).map { _ in LocalHistoryTests.directory() }
        defer { for directory in directories { try? FileManager.default.removeItem(atPath: directory) } }
        func connected(_ user: String, _ directory: String) async throws -> (SIMPClient, EventLog) {
            var configuration = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
            configuration.dataDirectory = directory
            configuration.endToEnd = true
            configuration.directoryCheckInterval = .zero
            let client = SIMPClient(configuration: configuration)
            let log = EventLog(client)
            try await client.register(user: user, password: "pw-\(user)")
            try await client.connect(user: user, password: "pw-\(user)")
            #expect(try await client.setUpIdentity() == .created)
            return (client, log)
        }
        let (alice, _) = try await connected("alicemem", directories[0])
        let (bob, bobLog) = try await connected("bobmem", directories[1])
        let texts = ["the heron waits by the weir", "the otter sleeps at noon in the reeds"]
        for text in texts {
            let id = try await alice.send(to: "bobmem", text: text)
            #expect(await bobLog.wait { $0.messages.contains { $0.id == id && $0.text == text && $0.encrypted } })
        }
        // The control: a group's name, which the server keeps in the clear.
        let note = "reedbedgroup"
        try await bob.set(.groupAdds(.everyone))
        _ = try await alice.createGroup(note, members: ["bobmem"])

        let hits = try Self.searchMemory(of: server.process.pid, for: (texts + [note, "alicemem"]).map { Array($0.utf8) })
        #expect(hits[0] == 0 && hits[1] == 0, "an encrypted text in the server's memory: \(hits)")
        #expect(hits[2] > 0 && hits[3] > 0, "the search finds what the server does hold: \(hits)")
        // Nor in what it logged at debug level, where the same names are.
        let logged = server.process.stdout + server.process.stderr
        #expect(texts.allSatisfy { !logged.contains($0) })
        #expect(logged.contains("alicemem"), "the log is the debug log, with the users in it")
        for client in [alice, bob] { await client.close() }
    }
}
