#if canImport(Glibc)
import Glibc
#endif
@testable import DurableLoad
import Foundation
import MQTTLoad
import NIOCore
import NIOPosix
import Testing

/// The NATS client protocol as the server speaks it (docs.nats.io, "Client Protocol").
@Suite struct NATSParserTests {
    @Test func controlLinesWithoutPayload() throws {
        #expect(try ops("PING\r\nPONG\r\n+OK\r\n") == [.ping, .pong, .ok])
        #expect(try ops("INFO {\"server_id\":\"x\",\"jetstream\":true}\r\n") == [.info("{\"server_id\":\"x\",\"jetstream\":true}")])
        #expect(try ops("-ERR 'Unknown Protocol Operation'\r\n") == [.error("Unknown Protocol Operation")])
    }

    @Test func aMessageWithAndWithoutReplySubject() throws {
        #expect(try ops("MSG a.b 1 5\r\nhello\r\n") == [.message(message("a.b", "1", nil, nil, "hello"))])
        #expect(try ops("MSG a.b 7 _INBOX.x.3 2\r\nhi\r\n") == [.message(message("a.b", "7", "_INBOX.x.3", nil, "hi"))])
        // The payload is bytes, counted, and may hold CR LF itself.
        #expect(try ops("MSG a 1 4\r\n\r\n\r\n\r\n") == [.message(message("a", "1", nil, nil, "\r\n\r\n"))])
        #expect(try ops("MSG a 1 0\r\n\r\n") == [.message(message("a", "1", nil, nil, ""))])
    }

    @Test func aHeadersMessageSplitsHeadersFromPayload() throws {
        let headers = "NATS/1.0\r\nK: v\r\n\r\n"
        let wire = "HMSG s 2 r \(headers.utf8.count) \(headers.utf8.count + 3)\r\n\(headers)abc\r\n"
        let parsed = try ops(wire)
        #expect(parsed == [.message(message("s", "2", "r", headers, "abc"))])
        if case .message(let m) = parsed.first { #expect(m.status == nil) }
    }

    /// No responders, as the server answers a request nobody serves (headers and no_responders on).
    @Test func aStatusOnlyHeadersMessage() throws {
        let headers = "NATS/1.0 503\r\n\r\n"
        guard case .message(let m)? = try ops("HMSG _INBOX.a.api 1 \(headers.utf8.count) \(headers.utf8.count)\r\n\(headers)\r\n").first else {
            Issue.record("no message")
            return
        }
        #expect(m.status == 503 && m.payload.readableBytes == 0)
    }

    /// A read may end anywhere: nothing is consumed until the whole operation is there.
    @Test func aPartialOperationWaitsForTheRest() throws {
        // Bytes, not Characters: "\r\n" is one Character.
        let wire = Array("MSG a.b 1 _R 5\r\nhello\r\nPING\r\n".utf8)
        for cut in 1..<wire.count - 6 {
            var buffer = ByteBuffer(bytes: wire.prefix(cut))
            #expect(try NATSParser.next(from: &buffer) == nil, "cut at \(cut)")
            #expect(buffer.readerIndex == 0)
            buffer.writeBytes(wire.dropFirst(cut))
            #expect(try NATSParser.next(from: &buffer) == .message(message("a.b", "1", "_R", nil, "hello")))
            #expect(try NATSParser.next(from: &buffer) == .ping)
            #expect(buffer.readableBytes == 0)
        }
    }

    @Test(arguments: ["MSG a\r\n", "MSG a 1 x\r\n", "MSG a 1 3\r\nabcXY", "HMSG a 1 9 3\r\nabc\r\n", "FOO\r\n", "\r\n"])
    func malformedInputIsAnError(_ wire: String) {
        var buffer = ByteBuffer(string: wire)
        #expect(throws: DurableLoadError.self) { _ = try NATSParser.next(from: &buffer) }
    }

    @Test func anEndlessControlLineIsAnError() {
        var buffer = ByteBuffer(string: "INFO " + String(repeating: "x", count: NATSParser.maxControlLine))
        #expect(throws: DurableLoadError.self) { _ = try NATSParser.next(from: &buffer) }
    }

    @Test func commands() throws {
        var bytes = ByteBuffer()
        NATSCommand.publish("s.1", replyTo: "_INBOX.r.7", payload: ByteBuffer(string: "abc"), into: &bytes)
        NATSCommand.publish("$JS.ACK.x", replyTo: nil, payload: ByteBuffer(), into: &bytes)
        NATSCommand.subscribe("d.>", sid: 3, into: &bytes)
        #expect(String(buffer: bytes) == "PUB s.1 _INBOX.r.7 3\r\nabc\r\nPUB $JS.ACK.x 0\r\n\r\nSUB d.> 3\r\n")
        var connect = ByteBuffer()
        NATSCommand.connect(name: "n", into: &connect)
        let line = String(buffer: connect)
        #expect(line.hasPrefix("CONNECT {") && line.hasSuffix("}\r\n"))
        let json = try JSONSerialization.jsonObject(with: Data(line.dropFirst(8).utf8)) as? [String: Any]
        #expect(json?["verbose"] as? Bool == false && json?["headers"] as? Bool == true && json?["name"] as? String == "n")
    }

    private func ops(_ wire: String) throws -> [NATSServerOp] {
        var buffer = ByteBuffer(string: wire)
        var parsed: [NATSServerOp] = []
        while let op = try NATSParser.next(from: &buffer) { parsed.append(op) }
        #expect(buffer.readableBytes == 0)
        return parsed
    }

    private func message(_ subject: String, _ sid: String, _ reply: String?, _ headers: String?, _ payload: String) -> NATSMessage {
        NATSMessage(subject: subject, sid: sid, replyTo: reply, headers: headers, payload: ByteBuffer(string: payload))
    }
}

@Suite struct JetStreamAPITests {
    @Test func aPubAckNamesStreamAndSequence() throws {
        let ack = try JetStreamAPI.pubAck(ByteBuffer(string: #"{"stream":"S_1","seq":42}"#))
        #expect(ack.stream == "S_1" && ack.seq == 42)
        #expect(try JetStreamAPI.pubAck(ByteBuffer(string: #"{"stream":"S","seq":7,"duplicate":true}"#)).seq == 7)
    }

    @Test func anErrorReplyFailsWithJetStreamsDescription() {
        let reply = #"{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}"#
        #expect(throws: DurableLoadError.protocolError("JetStream: jetstream not enabled (code 503, 10039)")) {
            _ = try JetStreamAPI.pubAck(ByteBuffer(string: reply))
        }
        let created = #"{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":400,"description":"bad"}}"#
        #expect(throws: DurableLoadError.self) { _ = try JetStreamAPI.reply(ByteBuffer(string: created)) }
    }

    @Test(arguments: ["", "not json", #"{"stream":"S"}"#, #"{"seq":1}"#])
    func somethingElseIsNotAPubAck(_ payload: String) {
        #expect(throws: DurableLoadError.self) { _ = try JetStreamAPI.pubAck(ByteBuffer(string: payload)) }
    }

    @Test func aStreamCreateReplyIsAccepted() throws {
        let reply = #"{"type":"io.nats.jetstream.api.v1.stream_create_response","config":{"name":"S"},"did_create":true}"#
        #expect(try JetStreamAPI.reply(ByteBuffer(string: reply)).error == nil)
    }

    @Test func requests() throws {
        let stream = JetStreamAPI.createStream("S_1", subject: "simp-bench.r.1")
        #expect(stream.subject == "$JS.API.STREAM.CREATE.S_1")
        let config = try object(stream.body)
        #expect(config["name"] as? String == "S_1" && config["subjects"] as? [String] == ["simp-bench.r.1"])
        #expect(config["storage"] as? String == "file" && config["retention"] as? String == "workqueue")
        let consumer = JetStreamAPI.createConsumer("S_1", durable: "c", deliverSubject: "d.1", maxAckPending: 64)
        #expect(consumer.subject == "$JS.API.CONSUMER.DURABLE.CREATE.S_1.c")
        let request = try object(consumer.body)
        let inner = request["config"] as? [String: Any] ?? [:]
        #expect(request["stream_name"] as? String == "S_1")
        #expect(inner["durable_name"] as? String == "c" && inner["deliver_subject"] as? String == "d.1")
        #expect(inner["ack_policy"] as? String == "explicit" && inner["max_ack_pending"] as? Int == 64)
    }

    @Test func aPubAckSubjectNamesItsCounter() {
        let names = JetStreamNames(runID: "ab", index: 3)
        #expect(names.counter(ofAck: names.inbox + ".17") == 17)
        #expect(names.counter(ofAck: names.apiInbox) == nil)
        #expect(names.counter(ofAck: "_INBOX.other.17") == nil)
        // Stream names may not hold dots; subjects are dot-separated tokens.
        #expect(!names.stream.contains(".") && names.subject.split(separator: ".").count == 3)
    }

    private func object(_ body: ByteBuffer) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] ?? [:]
    }
}

@Suite struct InFlightTests {
    let clock = LoadClock(warmup: 0, duration: 10, drain: 5, start: 1_000)

    @Test func aSlotIsFreedOnceAckedAndReceivedInEitherOrder() {
        var pair = InFlight(clock: clock, window: 2)
        let first = pair.send(at: 2_000)
        let second = pair.send(at: 3_000)
        #expect(!pair.canSend(at: 4_000))
        #expect(pair.acked(first, at: 5_000) == .waiting)
        #expect(pair.received(first, sentAt: 2_000, at: 6_000) == .freedSlot)
        #expect(pair.received(second, sentAt: 3_000, at: 6_000) == .waiting)
        #expect(pair.acked(second, at: 7_000) == .freedSlot)
        #expect(pair.acked(second, at: 7_000) == .duplicate)
        #expect(pair.acked(3, at: 7_000) == .unknown)
        #expect(pair.canSend(at: 8_000))
        let result = pair.finished()
        #expect(result.sent == 2 && result.received == 2 && result.lost == 0 && result.duplicates == 0)
        #expect(result.sendToAck.totalCount == 2 && result.sendToReceive.totalCount == 2)
    }

    @Test func aSecondDeliveryIsADuplicateAndAnUnsentCounterUnknown() {
        var pair = InFlight(clock: clock, window: 4)
        let counter = pair.send(at: 2_000)
        #expect(pair.received(counter, sentAt: 2_000, at: 3_000) == .waiting)
        #expect(pair.received(counter, sentAt: 2_000, at: 3_000) == .duplicate)
        _ = pair.acked(counter, at: 4_000)
        #expect(pair.received(counter, sentAt: 2_000, at: 5_000) == .duplicate)
        #expect(pair.received(99, sentAt: 2_000, at: 5_000) == .unknown)
        #expect(pair.finished().duplicates == 2)
    }

    /// RabbitMQ may confirm several publishes at once (multiple = true).
    @Test func aMultipleAckCoversEveryCounterUpToIt() {
        var pair = InFlight(clock: clock, window: 4)
        let counters = (0..<4).map { _ in pair.send(at: 2_000) }
        for counter in counters { _ = pair.received(counter, sentAt: 2_000, at: 3_000) }
        #expect(pair.acked(through: 3, at: 4_000) == 3)
        #expect(pair.acked(through: 4, at: 4_000) == 1)
        #expect(pair.finished().sendToAck.totalCount == 4)
    }

    @Test func whatNeverArrivedIsLostAndTheDrainEndsThePair() {
        var pair = InFlight(clock: clock, window: 4)
        let counter = pair.send(at: 2_000)
        _ = pair.acked(counter, at: 3_000)
        _ = pair.send(at: 2_000)
        #expect(!pair.isFinished(at: clock.measureUntil))
        #expect(pair.isFinished(at: clock.drainUntil))
        #expect(pair.finished().lost == 2)
        #expect(!pair.canSend(at: clock.measureUntil))
    }

    @Test func aBodyCarriesCounterAndSendTime() {
        var body = LoadMessage.template(size: 64)
        body.withUnsafeMutableBytes { LoadMessage.stamp($0, counter: 7, sentAt: 123_456_789) }
        #expect(body.count == 64 && body.suffix(48).allSatisfy { $0 == UInt8(ascii: "x") })
        #expect(body.withUnsafeBytes { LoadMessage.read($0) }.map { [$0.counter, $0.sentAt] } == [7, 123_456_789])
        #expect([UInt8](repeating: 0, count: 15).withUnsafeBytes { LoadMessage.read($0) } == nil)
    }
}

@Suite struct DurableBrokerSetupTests {
    /// The command name (field 2) may hold spaces and parentheses.
    @Test func procStatReadsNameAndParent() {
        let stat = ProcStat("4242 (beam.smp) S 4200 4242 4200 0 -1")
        #expect(stat?.name == "beam.smp" && stat?.parent == 4200)
        #expect(ProcStat("7 (a) b) R 1 7").map { [$0.name, "\($0.parent)"] } == ["a) b", "1"])
        #expect(ProcStat("garbage") == nil)
    }

    /// Nothing may come from /etc/rabbitmq or /var/lib/rabbitmq: a run must not depend on, or
    /// touch, a system broker's configuration and data.
    @Test func theNodeKeepsEverythingInItsDirectory() {
        let node = RabbitMQNode(amqpPort: 5000, distributionPort: 5001, epmdPort: 5002)
        let environment = node.environment("/tmp/d")
        for key in ["RABBITMQ_MNESIA_BASE", "RABBITMQ_LOG_BASE", "RABBITMQ_CONFIG_FILE", "RABBITMQ_CONF_ENV_FILE",
                    "RABBITMQ_ENABLED_PLUGINS_FILE", "RABBITMQ_ADVANCED_CONFIG_FILE", "HOME"] {
            #expect(environment[key]?.hasPrefix("/tmp/d") == true, "\(key)")
        }
        #expect(environment["RABBITMQ_NODE_PORT"] == "5000" && environment["RABBITMQ_DIST_PORT"] == "5001")
        #expect(environment["ERL_EPMD_PORT"] == "5002" && environment["RABBITMQ_NODE_IP_ADDRESS"] == "127.0.0.1")
    }

    @Test func aMissingBrokerSaysWhatToInstall() {
        let error = DurableLoadError.brokerNotFound(broker: RabbitMQBroker.name, install: RabbitMQBroker.install)
        #expect(error.description.contains("apt-get install rabbitmq-server"))
        #expect(NATSBroker.install.contains("apt-get install nats-server"))
    }

    @Test func aBodyTooSmallForCounterAndTimeIsRefused() async throws {
        let pattern = LoadPattern(pairs: 1, window: 1, payloadBytes: 8, duration: 1)
        await #expect(throws: DurableLoadError.self) { _ = try await RabbitMQLoad.run(pattern, host: "127.0.0.1", port: 1) }
        await #expect(throws: DurableLoadError.self) {
            _ = try await JetStreamLoad.run(pattern, host: "127.0.0.1", port: 1, group: MultiThreadedEventLoopGroup.singleton)
        }
    }

    /// Nothing listening: the run fails at once with the reason, instead of hanging.
    @Test func noBrokerFailsTheRun() async throws {
        let port = try await LocalPorts.free()
        let pattern = LoadPattern(pairs: 2, window: 1, duration: 1)
        let rabbit = await #expect(throws: DurableLoadError.self) { _ = try await RabbitMQLoad.run(pattern, host: "127.0.0.1", port: port) }
        #expect(rabbit?.description.contains("cannot connect to 127.0.0.1:\(port)") == true, "\(String(describing: rabbit))")
        let nats = await #expect(throws: DurableLoadError.self) {
            _ = try await JetStreamLoad.run(pattern, host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
        }
        #expect(nats?.description.contains("cannot connect to 127.0.0.1:\(port)") == true, "\(String(describing: nats))")
    }
}

/// The real brokers (scripts/install-brokers.sh): 2 pairs x 4 in flight for 2 s; every message arrives once.
@Suite(.serialized) struct DurableLoadTests {
    static let pattern = LoadPattern(pairs: 2, window: 4, payloadBytes: 64, duration: 2, warmup: 0.2, drain: 30)

    @Test(.enabled(if: RabbitMQBroker.executable() != nil, "rabbitmq-server is not installed (scripts/install-brokers.sh)"))
    func aShortRunThroughRabbitMQLosesNothing() async throws {
        let vm = PID()
        let result = try await RabbitMQLoad.run(Self.pattern, started: { vm.value = $0.pid })
        expectEveryMessageOnce(result)
        // The VM is gone, not left running (or a zombie: its parent reaped it).
        #expect(vm.value > 0 && kill(vm.value, 0) != 0)
    }

    @Test(.enabled(if: NATSBroker.executable() != nil, "nats-server is not installed (scripts/install-brokers.sh)"))
    func aShortRunThroughJetStreamLosesNothing() async throws {
        let server = PID()
        let result = try await JetStreamLoad.run(Self.pattern, started: { server.value = $0.pid })
        expectEveryMessageOnce(result)
        #expect(server.value > 0 && kill(server.value, 0) != 0)
    }

    /// Each pair's stream is deleted at the end, so a run against a shared server leaves nothing behind.
    @Test(.enabled(if: NATSBroker.executable() != nil, "nats-server is not installed (scripts/install-brokers.sh)"))
    func aJetStreamRunDeletesItsStreams() async throws {
        let broker = try await NATSBroker.start()
        let result: MQTTLoadResult
        do {
            result = try await JetStreamLoad.run(LoadPattern(pairs: 2, window: 2, duration: 0.5, warmup: 0),
                                                 host: "127.0.0.1", port: broker.port, group: MultiThreadedEventLoopGroup.singleton)
        } catch {
            await broker.stop()
            throw error
        }
        let files = FileManager.default.enumerator(atPath: broker.directory)?.compactMap { $0 as? String } ?? []
        await broker.stop()
        #expect(result.received > 0)
        #expect(!files.isEmpty && !files.contains { $0.contains("SIMP_BENCH_") }, "\(files)")
    }

    private func expectEveryMessageOnce(_ result: MQTTLoadResult) {
        #expect(result.errors.isEmpty, "\(result.errors)")
        #expect(result.received > 0)
        #expect(result.received == result.sent)
        #expect(result.lost == 0 && result.duplicates == 0)
        #expect(result.sendToReceive.totalCount > 0 && result.sendToAck.totalCount > 0)
        #expect(result.measuredSeconds == Self.pattern.duration)
    }
}

/// The broker's pid, from the run's `started` callback.
private final class PID: @unchecked Sendable {
    private let lock = NSLock()
    private var pid: Int32 = 0

    var value: Int32 {
        get { lock.withLock { pid } }
        set { lock.withLock { pid = newValue } }
    }
}
