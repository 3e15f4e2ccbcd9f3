import Crypto
import Foundation
import NIOConcurrencyHelpers
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Garbage against a running simp-server process: random and mutated frames on many TCP
/// connections, random and mutated datagrams (some under a real session's key), while two
/// clients hold a conversation. Nothing of the conversation is lost or reordered, and the
/// server's memory stays bounded.
@Suite(.serialized) struct RobustnessTests {
    static let frames = 10_000
    static let datagrams = 10_000

    @Test func tenThousandBadFramesAndDatagramsWhileAConversationGoesOn() async throws {
        let node = try ServerNode()
        defer { node.stop() }
        let server = node.server
        var config = ClientConfiguration(host: "127.0.0.1", port: server.tcpPort)
        config.reconnectBase = .milliseconds(50)
        let alice = SIMPClient(configuration: config)
        let bob = SIMPClient(configuration: config)
        let aliceLog = EventLog(alice)
        let bobLog = EventLog(bob)
        for (client, user) in [(alice, "alice"), (bob, "bob")] {
            try await client.register(user: user, password: "pw-\(user)")
            try await client.connect(user: user, password: "pw-\(user)")
        }
        let mallory = try RawPeer(tcpPort: server.tcpPort, udpPort: server.udpPort)
        try await SIMPClient(configuration: config).register(user: "mallory", password: "pw-mallory")
        try mallory.connectAndBind(token: try mallory.login("mallory", "pw-mallory"))

        // Warm up, then take the baseline.
        _ = try await alice.send(to: "bob", text: "warm-up")
        #expect(await bobLog.wait { $0.messages.count == 1 })
        let rssBefore = try residentKiB(server.process.pid)

        let attack = Attack(tcpPort: server.tcpPort, udpPort: server.udpPort, mallory: mallory)
        let attackDone = attack.start()
        var sent = ["warm-up"]
        var n = 0
        while !attack.isFinished {
            n += 1
            _ = try await alice.send(to: "bob", text: "during \(n)")
            sent.append("during \(n)")
            try await Task.sleep(for: .milliseconds(20))
        }
        let report = await attackDone.value
        #expect(report.frames == Self.frames && report.datagrams == Self.datagrams)
        #expect(report.connections > 1, "the server closed connections that sent garbage")

        #expect(await bobLog.wait(timeout: .seconds(60)) { $0.messages.count >= sent.count })
        #expect(bobLog.messages.map(\.text) == sent, "every message, once, in order")
        #expect(await aliceLog.wait { $0.delivered.count == sent.count })
        #expect(aliceLog.failed.isEmpty)

        // Still serving: a new user registers, logs in and is reached.
        let carol = SIMPClient(configuration: config)
        let carolLog = EventLog(carol)
        try await carol.register(user: "carol", password: "pw-carol")
        try await carol.connect(user: "carol", password: "pw-carol")
        _ = try await alice.send(to: "carol", text: "after")
        #expect(await carolLog.wait { $0.messages.map(\.text) == ["after"] })

        let rssAfter = try residentKiB(server.process.pid)
        let summary = "robustness: \(report.frames) frames on \(report.connections) connections, \(report.datagrams) datagrams, "
            + "\(sent.count) messages delivered meanwhile; server RSS \(rssBefore / 1024) MiB -> \(rssAfter / 1024) MiB"
        print(summary)
        #expect(rssAfter - rssBefore < 64 * 1024, "server memory grew by \(rssAfter - rssBefore) KiB")
        for client in [alice, bob, carol] { await client.close() }
    }
}

/// VmRSS of a process, in KiB.
func residentKiB(_ pid: pid_t) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kib = Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) else {
        throw TestSupportError("no VmRSS for \(pid)")
    }
    return kib
}

/// The garbage generator; runs on a thread of its own (blocking sockets stay off the
/// cooperative pool).
final class Attack: @unchecked Sendable {
    struct Report: Sendable {
        var frames = 0
        var datagrams = 0
        var connections = 0
    }

    let tcpPort: Int
    let udpPort: Int
    let mallory: RawPeer
    private let finished = NIOLockedValueBox(false)
    private var rng = SplitMix64(seed: 0xBAD_F00D)

    init(tcpPort: Int, udpPort: Int, mallory: RawPeer) {
        self.tcpPort = tcpPort
        self.udpPort = udpPort
        self.mallory = mallory
    }

    var isFinished: Bool { finished.withLockedValue { $0 } }

    func start() -> Task<Report, Never> {
        let (stream, continuation) = AsyncStream.makeStream(of: Report.self)
        Thread { [self] in
            let report = run()
            finished.withLockedValue { $0 = true }
            continuation.yield(report)
            continuation.finish()
        }.start()
        return Task { await stream.first { _ in true } ?? Report() }
    }

    private func run() -> Report {
        var report = Report()
        var tcp: Int32 = -1
        for i in 0..<RobustnessTests.frames {
            if tcp < 0 {
                tcp = connectTCP(tcpPort)
                report.connections += 1
            }
            if !send(tcp, frame()) {
                close(tcp)
                tcp = -1
            }
            report.frames += 1
            drain(tcp)
            drain(mallory.tcp)
            let datagramsPerFrame = RobustnessTests.datagrams / RobustnessTests.frames
            for _ in 0..<datagramsPerFrame {
                sendDatagram()
                report.datagrams += 1
            }
            if i % 100 == 0 { usleep(2000) }  // let the conversation breathe
        }
        if tcp >= 0 { close(tcp) }
        return report
    }

    private static let templates: [Simp_Envelope.OneOf_Body] = {
        var login = Simp_LoginRequest()
        login.user = "mallory"
        login.password = "guess"
        var connect = Simp_ConnectRequest()
        connect.token = "alice.9999999999999.1.00"
        var receipt = Simp_Receipt()
        receipt.upToSeq = 5
        receipt.missing = [1, 2, 3]
        var history = Simp_HistoryRequest()
        history.peer = "alice"
        var query = Simp_DeliveryQuery()
        query.messages = [Simp_Accepted()]
        return [.login(login), .connect(connect), .receipt(receipt), .history(history), .query(query),
                .ping(Simp_Ping()), .logout(Simp_Logout()), .withdraw(Simp_Withdraw()), .pathResponse(Simp_PathResponse())]
    }()

    /// A frame: random bytes under a plausible length, a mutated real envelope, or a lying length.
    private func frame() -> [UInt8] {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<4:
            let body = randomBytes(Int.random(in: 1..<300, using: &rng))
            return lengthPrefix(body.count) + body
        case 4..<9:
            let template = Self.templates[Int.random(in: 0..<Self.templates.count, using: &rng)]
            var body: [UInt8] = (try? Simp_Envelope(requestID: UInt64.random(in: 0..<100, using: &rng), template).serializedBytes()) ?? []
            mutate(&body)
            return lengthPrefix(body.count) + body
        default:
            return lengthPrefix(Int.random(in: 65_537..<Int(UInt32.max), using: &rng)) + randomBytes(8)
        }
    }

    /// A datagram: random bytes, a valid header over garbage, or a real session's sealed
    /// datagram that is mutated, replayed, or sealed over a random payload.
    private func sendDatagram() {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0:
            mallory.sendRaw(randomBytes(Int.random(in: 0..<1500, using: &rng)))
        case 1:
            let header = DatagramHeader(kind: DatagramKind(rawValue: UInt8.random(in: 1...5, using: &rng))!,
                                        sessionID: mallory.session?.sessionID ?? 0, packetNumber: rng.next())
            let payload = randomBytes(Int.random(in: 0..<200, using: &rng))
            var bytes = (try? Datagram.encode(header, payload: payload)).map { Array($0.readableBytesView) } ?? []
            if Bool.random(using: &rng) { mutate(&bytes) }
            mallory.sendRaw(bytes)
        case 2:
            mallory.sendDatagram(.data, randomBytes(Int.random(in: 0..<64, using: &rng)))
            var replay = mallory.lastSent
            mutate(&replay)
            mallory.sendRaw(replay)
        default:
            mallory.sendRaw(mallory.lastSent)  // a replay
        }
    }

    private func mutate(_ bytes: inout [UInt8]) {
        guard !bytes.isEmpty else { return }
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let i = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: bytes[i] ^= UInt8(1) << UInt8.random(in: 0...7, using: &rng)
            case 1: bytes[i] = UInt8.random(in: 0...255, using: &rng)
            default: bytes.removeLast(min(bytes.count - 1, Int.random(in: 0...8, using: &rng)))
            }
        }
    }

    private func randomBytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    private func lengthPrefix(_ n: Int) -> [UInt8] {
        [UInt8(n >> 24 & 0xff), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)]
    }

    /// From an address of its own (127.0.0.2), as an attacker would be: its garbage includes
    /// failed logins, which throttle their source address for every name it has not logged
    /// in to, and the new user at the end comes from 127.0.0.1.
    private func connectTCP(_ port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var local = RawPeer.loopback(0)
        local.sin_addr.s_addr = inet_addr("127.0.0.2")
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var addr = RawPeer.loopback(port)
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return fd
    }

    private func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Reads whatever the server answered, without waiting; the answers themselves are not the point.
    private func drain(_ fd: Int32) {
        guard fd >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
    }
}
