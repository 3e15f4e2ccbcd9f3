import Foundation
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Congestion control on the server's path to a session, through a real bottleneck: a
/// network namespace whose iptables polices the server's datagrams to 100 a second
/// (hashlimit; TCP untouched), as a phone's link might.
@Suite(.serialized, .enabled(if: NetworkNamespace.available, "needs root, iproute2 and iptables for a network namespace"))
struct CongestionTests {
    static let waiting = 1500
    static let policedRate = 100
    /// The most of what reaches the policer that may be dropped, as the median of three
    /// catch-ups: a guard against a controller that stops finding the policer (72% dropped
    /// without one), not a target. Typical figures are 6-17% (docs/PERFORMANCE.md), but about
    /// one catch-up in seven overshoots the policer (28-49%), and on a loaded CI machine two of
    /// three did (2026-11-28: 29% median), so the guard sits between an overshoot and no
    /// controller. How fast and how cleanly a catch-up goes is a measured figure, printed by each
    /// run, never a bound on the clock.
    static let maxDroppedShare = 0.6

    /// bob comes back to 1,500 waiting messages (about 270 bytes each, stored) through the
    /// policer: every message arrives once and in order, the server's metrics show the
    /// congestion events it reacted to, and the median share of what reaches the policer that is
    /// dropped stays under `maxDroppedShare`. Each run prints its figures (dropped share,
    /// seconds to catch up; without congestion control 72% were dropped and it took 15.7 s).
    @Test func aCatchUpThroughAPolicerDeliversEveryMessageAndFindsThePolicer() throws {
        Self.expectTypically(try (0..<3).map { _ in try catchUpThroughAPolicer(longMessageAt: nil) })
    }

    /// The same with a 60 KiB message (63 parts, each a full datagram) among the 1,500.
    @Test func aCatchUpWithALongMessageInItDeliversEveryMessageAndFindsThePolicer() throws {
        Self.expectTypically(try (0..<3).map { _ in try catchUpThroughAPolicer(longMessageAt: 700) })
    }

    /// One catch-up's figures: the share of what reached the policer that it dropped, and the
    /// seconds from bob's start to his last message.
    typealias CatchUp = (droppedShare: Double, seconds: Double)

    /// The median catch-up of `runs` found the policer (each run's figures are printed; the
    /// seconds are reported, not bounded).
    static func expectTypically(_ runs: [CatchUp]) {
        let dropped = runs.map(\.droppedShare).sorted()[runs.count / 2]
        print("catch-ups (dropped share, seconds): \(runs)")
        #expect(dropped <= maxDroppedShare, "at most \(Int(maxDroppedShare * 100))% of what reached the policer dropped (median of \(runs))")
    }

    /// The client's path (`--congestion-control`): alice sends 1,500 messages and a 60 KiB
    /// one through a policer of her datagrams to the server at 100 a second. Every message is stored once, in order
    /// (bob, online, gets them so), and at most a fifth of what reaches the policer is dropped.
    /// UDP's own congestion control is what is measured: alice keeps to UDP
    /// (`--datagrams-over-stream never`), where her client would otherwise ask for the stream
    /// once it found the policer far below the stream's rate (UDPBlockedTests).
    @Test func aSenderThroughAPolicerLosesLittle() throws {
        let stack = try NamespaceStack(serverOptions: ["--datagrams-over-stream", "never"])
        try stack.register("bob")
        let bob = try stack.client("bob", [])
        defer { bob.closeStdin(); _ = bob.waitForExit(timeout: 20) }
        #expect(bob.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil)
        let alice = try stack.client("alice", ["--register", "--linger", "0", "--congestion-control", "--datagrams-over-stream", "never"])
        #expect(alice.waitForLine(timeout: 30) { $0.contains(#""event":"connected""#) } != nil)
        try stack.police(rate: Self.policedRate, toServer: true)
        let filler = String(repeating: "x", count: 200)
        let longText = String(repeating: "long message, ünïcödé; ", count: 60 * 1024 / 27) + "end"
        let count = Self.waiting + 1
        let start = Date()
        alice.write((0..<Self.waiting).map { i in "/send bob \(i) \(filler)\n" + (i == 700 ? "/send bob \(longText)\n" : "") }.joined())
        let deadline = Date().addingTimeInterval(90)
        while Date() < deadline, stack.count(of: "message", in: bob) < count { usleep(100_000) }
        let took = Date().timeIntervalSince(start)
        alice.closeStdin()
        #expect(alice.waitForExit(timeout: 30) == 0, "alice: \(alice.stderr)")
        let sent = stack.events(alice).filter { $0["event"] as? String == "accepted" }.compactMap { $0["id"] as? String }
        let received = stack.events(bob).filter { $0["event"] as? String == "message" }
        let (reached, dropped) = try stack.policerCounts()
        print("sending through a \(Self.policedRate)/s policer: \(received.count) messages in \(String(format: "%.1f", took)) s; "
              + "\(reached) datagrams reached the policer, \(dropped) dropped (\(reached > 0 ? dropped * 100 / reached : 0)%)")
        #expect(sent.count == count, "every message accepted once")
        #expect(received.compactMap { $0["id"] as? String } == sent, "stored once, in the order sent")
        #expect(received.filter { $0["text"] as? String == longText }.count == 1, "the long message arrived whole, once")
        #expect(Double(dropped) <= Self.maxDroppedShare * Double(reached), "at most \(Int(Self.maxDroppedShare * 100))% of what reached the policer dropped")
    }

    /// UDP's own congestion control is what is measured: the server keeps to UDP
    /// (`--datagrams-over-stream never`), where it would otherwise move a backlog held far below
    /// the stream's rate into the control connection (UDPBlockedTests).
    private func catchUpThroughAPolicer(longMessageAt long: Int?) throws -> CatchUp {
        let stack = try NamespaceStack(serverOptions: ["--datagrams-over-stream", "never"])
        try stack.register("bob")
        // bob is offline: alice's messages are accepted (stored), never delivered, so she
        // leaves once all are accepted rather than lingering for receipts.
        let alice = try stack.client("alice", ["--register", "--linger", "0"])
        let filler = String(repeating: "x", count: 200)
        let longText = String(repeating: "long message, ünïcödé; ", count: 60 * 1024 / 27) + "end"
        let count = Self.waiting + (long == nil ? 0 : 1)
        alice.write((0..<Self.waiting).map { i in
            "/send bob \(i) \(filler)\n" + (i == long ? "/send bob \(longText)\n" : "")
        }.joined())
        let stored = Date().addingTimeInterval(60)
        while Date() < stored, stack.count(of: "accepted", in: alice) < count { usleep(50_000) }
        alice.closeStdin()
        #expect(alice.waitForExit(timeout: 30) == 0, "alice: \(alice.stderr)")
        let sent = stack.events(alice).filter { $0["event"] as? String == "accepted" }.compactMap { $0["id"] as? String }
        #expect(sent.count == count, "alice's messages were all stored")

        try stack.police(rate: Self.policedRate)
        let start = Date()
        let bob = try stack.client("bob", ["--datagrams-over-stream", "never"])
        defer { bob.closeStdin(); _ = bob.waitForExit(timeout: 20) }
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, stack.count(of: "message", in: bob) < count { usleep(100_000) }
        let received = stack.events(bob).filter { $0["event"] as? String == "message" }
        if long != nil {
            #expect(received.filter { $0["text"] as? String == longText }.count == 1, "the long message arrived whole, once")
        }
        let ids = received.compactMap { $0["id"] as? String }
        let times = received.compactMap { $0["receivedAt"] as? Double }
        let (reached, dropped) = try stack.policerCounts()
        let catchUp = (times.last ?? 0) / 1000 - start.timeIntervalSince1970
        print("catch-up through a \(Self.policedRate)/s policer: \(ids.count) messages in \(String(format: "%.1f", catchUp)) s "
              + "(first to last \(String(format: "%.1f", ((times.last ?? 0) - (times.first ?? 0)) / 1000)) s); "
              + "\(reached) datagrams reached the policer, \(dropped) dropped (\(reached > 0 ? dropped * 100 / reached : 0)%)")
        print("server metrics: " + ["simp_pushes_lost_total", "simp_congestion_events_total", "simp_retransmits_total", "simp_push_bundles_total"]
            .map { "\($0) \(Int(stack.metric($0)))" }.joined(separator: ", "))
        let path = stack.get("/sessions").split(separator: "\n").first { $0.hasPrefix("bob ") }.map { $0.split(separator: " ") } ?? []
        print("bob's path: \(path.joined(separator: " "))")
        #expect(path.count == 9 && (Int(path[6]) ?? 0) > 0 && (Int(path[7]) ?? 0) > 0,
                "GET /sessions reports the losses and congestion events bob's path had")
        #expect(ids == sent, "every message once, in order")
        return (reached > 0 ? Double(dropped) / Double(reached) : 0, catchUp)
    }
}

/// Redis and simp-server in a network namespace of their own, and clients started in it.
final class NamespaceStack {
    let ns: NetworkNamespace
    let server: ServerProcess
    let metricsPort: Int
    private let redis: ChildProcess
    private let simp: String
    private let policeChain = "simp-police"

    /// `serverOptions`: more of simp-server's options.
    init(serverOptions: [String] = []) throws {
        ns = try NetworkNamespace()
        try ns.run("ip", "link", "set", "lo", "up")
        let redisPort = try freeTCPPort()
        let redisDir = FileManager.default.temporaryDirectory.appendingPathComponent("simp-ns-redis-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: redisDir, withIntermediateDirectories: true)
        redis = try ChildProcess("/usr/sbin/ip", ["netns", "exec", ns.name, try findExecutable("redis-server").path,
                                                  "--port", "\(redisPort)", "--save", "", "--dir", redisDir])
        try ns.waitForRedis(port: redisPort)
        metricsPort = try freeTCPPort()
        server = try ServerProcess(redisURL: "redis://127.0.0.1:\(redisPort)", extra: ["--metrics-port", "\(metricsPort)"] + serverOptions,
                                   wrapper: ["/usr/sbin/ip", "netns", "exec", ns.name])
        simp = try productPath("simp")
    }

    deinit {
        server.process.signal(SIGTERM)
        _ = server.process.waitForExit(timeout: 10)
        redis.signal(SIGTERM)
        _ = redis.waitForExit(timeout: 5)
    }

    /// The REPL in JSON, as `user` (password "pw"), inside the namespace.
    func client(_ user: String, _ extra: [String]) throws -> ChildProcess {
        try ChildProcess("/usr/sbin/ip", ["netns", "exec", ns.name, simp, "--no-e2e", "--server", "127.0.0.1:\(server.tcpPort)",
                                          "--user", user, "--password", "pw", "--json"] + extra)
    }

    /// Registers `user` and leaves.
    func register(_ user: String) throws {
        let p = try client(user, ["--register"])
        guard p.waitForLine(timeout: 30, where: { $0.contains(#""event":"connected""#) }) != nil else {
            throw TestSupportError("\(user) did not connect: \(p.stderr)")
        }
        p.closeStdin()
        _ = p.waitForExit(timeout: 20)
    }

    func events(_ process: ChildProcess) -> [[String: Any]] {
        process.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func count(of event: String, in process: ChildProcess) -> Int {
        process.stdout.components(separatedBy: #""event":"\#(event)""#).count - 1
    }

    /// From now on the server's datagrams to its clients pass a policer of `rate` a second
    /// (bursts of 5, hashlimit's default): the first rule counts what reaches it.
    /// `toServer`: the clients' datagrams to the server instead.
    func police(rate: Int, toServer: Bool = false) throws {
        try ns.run("iptables", "-N", policeChain)
        try ns.run("iptables", "-A", "INPUT", "-p", "udp", toServer ? "--dport" : "--sport", "\(server.udpPort)", "-j", policeChain)
        try ns.run("iptables", "-A", policeChain, "-m", "hashlimit", "--hashlimit-above", "\(rate)/sec", "--hashlimit-burst", "5",
                   "--hashlimit-mode", toServer ? "dstport" : "srcport", "--hashlimit-name", "simp-\(server.udpPort)", "-j", "DROP")
    }

    /// Datagrams that reached the policer, and those it dropped.
    func policerCounts() throws -> (reached: Int, dropped: Int) {
        func packets(_ chain: String, matching: String) throws -> Int {
            let p = try ChildProcess("/usr/sbin/ip", ["netns", "exec", ns.name, try findExecutable("iptables").path, "-L", chain, "-v", "-x", "-n"])
            _ = p.waitForExit(timeout: 10)
            let line = p.stdout.split(separator: "\n").first { $0.contains(matching) }
            return line.flatMap { Int($0.split(separator: " ").first ?? "") } ?? 0
        }
        return (try packets("INPUT", matching: policeChain), try packets(policeChain, matching: "DROP"))
    }

    /// A counter of the server's, read over HTTP inside the namespace.
    func metric(_ name: String) -> Double {
        metricValue(get("/metrics"), name)
    }

    /// The body of a GET on the server's metrics port (bash's /dev/tcp: no HTTP client is
    /// installed for this alone).
    func get(_ path: String) -> String {
        let get = "exec 3<>/dev/tcp/127.0.0.1/\(metricsPort); printf 'GET \(path) HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
        guard let p = try? ChildProcess("/usr/sbin/ip", ["netns", "exec", ns.name, "/bin/bash", "-c", get]) else { return "" }
        _ = p.waitForExit(timeout: 10)
        return p.stdout.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    }
}
