import Foundation
import Logging
import SIMPClient
import SIMPServer
import Testing

/// Lines a JSONLogHandler wrote, kept for assertions.
final class LogCapture: @unchecked Sendable {
    private let lock = NSLock()
    private var captured: [String] = []

    var sink: JSONLogHandler.Sink {
        { [self] line in lock.withLock { captured.append(line) } }
    }

    var lines: [String] { lock.withLock { captured } }

    var objects: [[String: Any]] {
        lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// A logger that records every level into this capture.
    func logger(_ label: String = "simp.server") -> Logger {
        var logger = Logger(label: label) { [sink] label in JSONLogHandler(label: label, sink: sink) }
        logger.logLevel = .trace
        return logger
    }
}

@Suite struct JSONLogTests {
    @Test func oneObjectPerLineWithTimestampLevelLabelMessageAndMetadata() throws {
        let capture = LogCapture()
        var logger = capture.logger("simp.test")
        logger[metadataKey: "node"] = "n1"
        logger.warning("peer said \"hi\"\nthen left", metadata: ["user": "alice", "session": "42", "peer": ["ip": "10.0.0.1"]])
        #expect(capture.lines.count == 1)
        #expect(capture.lines.allSatisfy { !$0.contains("\n") })
        let object = try #require(capture.objects.first)
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "simp.test")
        #expect(object["message"] as? String == "peer said \"hi\"\nthen left")
        #expect(object["user"] as? String == "alice")
        #expect(object["session"] as? String == "42")
        #expect(object["node"] as? String == "n1")
        #expect(object["peer.ip"] as? String == "10.0.0.1")
        let ts = try #require(object["ts"] as? String)
        #expect(ts.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(ts)")
    }

    @Test func theFixedFieldsWinOverMetadataOfTheSameName() throws {
        let capture = LogCapture()
        capture.logger().info("real", metadata: ["message": "forged", "level": "critical"])
        let object = try #require(capture.objects.first)
        #expect(object["message"] as? String == "real")
        #expect(object["level"] as? String == "info")
    }

    @Test func levelsBelowTheHandlersAreNotWritten() {
        let capture = LogCapture()
        var logger = capture.logger()
        logger.logLevel = .notice
        logger.info("quiet")
        logger.notice("loud")
        #expect(capture.objects.map { $0["message"] as? String } == ["loud"])
    }

    /// A whole login: register, log in, connect, send, log out, through the real server at
    /// trace level. Its log names the user and session but holds no password, token or text.
    @Test func aLoginFlowLogsSessionsButNoSecrets() async throws {
        let capture = LogCapture()
        let cluster = try await TestCluster.start(logger: capture.logger())
        let password = "pw-carol-\(UUID().uuidString)"
        let text = "private words \(UUID().uuidString)"
        let (dave, daveLog) = try await cluster.connectedClient("dave")
        let carol = SIMPClient(configuration: cluster.clientConfiguration())
        try await carol.register(user: "carol", password: password)
        try await carol.connect(user: "carol", password: password)
        let token = try #require(await carol.loginToken()).value
        _ = try await carol.send(to: "dave", text: text)
        #expect(await daveLog.wait { $0.messages.contains { $0.text == text } })
        try await carol.logout()
        await dave.close()
        let closed = await eventually { capture.lines.contains { $0.contains("session closed") && $0.contains("carol") } }
        await cluster.stop()

        #expect(closed)
        let carolLines = capture.objects.filter { $0["user"] as? String == "carol" }
        let opened = carolLines.filter { $0["message"] as? String == "session opened" }
        let closedLines = carolLines.filter { $0["message"] as? String == "session closed" }
        #expect(opened.count == 1 && closedLines.count == 1)
        #expect((opened.first?["session"] as? String).flatMap(UInt64.init) != nil)
        #expect(opened.first?["session"] as? String == closedLines.first?["session"] as? String)
        let all = capture.lines.joined(separator: "\n")
        for secret in [password, "pw-dave", token, text] {
            #expect(!all.contains(secret), "the log holds a secret: \(secret)")
        }
    }
}
