import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// Issue 9, finding 12: what one user sends must not steer another's terminal or application.
@Suite(.serialized) struct UntrustedContentTests {
    /// A hand-driven sender (the library would refuse): an image URL of another scheme gets
    /// `failed{BAD_REQUEST}`, and the sender's next message is not left waiting for its number.
    @Test func anImageURLOfAnotherSchemeIsRefusedAndTheNextMessageStillGoes() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("mallory")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let peer = try RawPeer(tcpPort: cluster.addresses.tcpPort, udpPort: cluster.addresses.udpPort)
        try peer.connectAndBind(token: try peer.login("mallory", "pw-mallory"))

        peer.sendDatagram(.data, try image(id: "bad-1", clientSeq: 1, url: "javascript:alert(document.cookie)"))
        peer.sendDatagram(.data, try image(id: "good-2", clientSeq: 2, url: "https://example.org/cat.png"))
        var failed: Simp_Failed?
        var accepted: Simp_Accepted?
        while failed == nil || accepted == nil, let envelope = try peer.read() {
            if case .failed(let f) = envelope.body { failed = f }
            if case .accepted(let a) = envelope.body { accepted = a }
        }
        #expect(failed?.messageID == "bad-1")
        #expect(failed?.code == .badRequest)
        #expect(failed?.reason == "imageURL must start with http:// or https://")
        #expect(accepted?.messageID == "good-2")
        #expect(await bobLog.wait { !$0.messages.isEmpty })
        // bad-1 was failed, so never stored: once bob's inbox is settled nothing else can come.
        #expect(await cluster.settled("bob"))
        #expect(bobLog.messages.map(\.imageURL?.absoluteString) == ["https://example.org/cat.png"], "only the web URL reached bob")
        await bob.close()
        await cluster.stop()
    }

    func image(id: String, clientSeq: UInt64, url: String) throws -> [UInt8] {
        var message = Simp_Message()
        message.version = 1
        message.messageID = id
        message.toUser = "bob"
        message.type = .image
        message.imageURL = url
        message.clientSeq = clientSeq
        return try message.serializedBytes()
    }

    /// The REPL receives a message built to clear the screen, move the cursor, fake lines
    /// from others, ring the bell and reverse the text, live and again through /history:
    /// its output holds none of those bytes, only their escaped forms, one line each.
    @Test func theREPLPrintsControlCharactersEscaped() async throws {
        let redis = try RedisServerProcess()
        let server = try ServerProcess(redisURL: redis.url)
        let bob = try ChildProcess(try productPath("simp"),
                                   ["--no-e2e", "--server", "127.0.0.1:\(server.tcpPort)", "--user", "bob", "--password", "b", "--register"])
        #expect(bob.waitForLine(timeout: 20) { $0 == "connected as bob" } != nil)
        let alice = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: server.tcpPort))
        try await alice.register(user: "alice", password: "a")
        try await alice.connect(user: "alice", password: "a")
        let hostile = "\u{1B}[2J\u{1B}[Hcarol: you are fired\r\nbob: ok\u{07}\u{9B}31m\u{202E}gnp.exe"
        _ = try await alice.send(to: "bob", text: hostile)
        _ = try await alice.send(to: "bob", imageURL: URL(string: "https://example.org/\u{1B}]0;owned\u{07}.png")!)
        #expect(bob.waitForLine(timeout: 20) { $0.contains("[image]") } != nil)
        bob.write("/history alice 5\n")
        #expect(waitForCount(bob, of: "[image]", count: 2))
        bob.closeStdin()
        #expect(bob.waitForExit(timeout: 20) == 0)
        await alice.close()

        let bytes = [UInt8](FileManager.default.contents(atPath: bob.stdoutPath) ?? Data())
        #expect(!bytes.contains(0x1B), "no ESC reached the terminal")
        #expect(!bytes.contains(0x07) && !bytes.contains(0x0D), "no bell, no carriage return")
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(!text.unicodeScalars.contains { $0.value == 0x9B || $0.value == 0x202E })
        let shown = #"alice: \e[2J\e[Hcarol: you are fired\r\nbob: ok\x07\u{9b}31m\u{202e}gnp.exe"#
        // Split at every LF byte: a Character split would keep "\r\n" inside a line.
        let lines = bytes.split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        #expect(lines.filter { $0 == shown }.count == 2, "live and in the history, each on one line")
        // An image link is a `URL` on both sides, which percent-encodes what no URL may hold.
        #expect(lines.filter { $0 == "alice: [image] https://example.org/%1B%5D0;owned%07.png" }.count == 2)
        #expect(!lines.contains { $0.hasPrefix("carol:") || $0.hasPrefix("bob:") }, "no faked line")
    }

    func waitForCount(_ process: ChildProcess, of needle: String, count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if process.stdout.components(separatedBy: needle).count - 1 >= count { return true }
            usleep(20_000)
        }
        return false
    }
}
