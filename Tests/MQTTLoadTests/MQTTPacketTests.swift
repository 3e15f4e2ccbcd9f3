import MQTTLoad
import NIOCore
import NIOPosix
import Testing

@Suite struct MQTTPacketTests {
    /// MQTT 3.1.1 section 2.2.3: the remaining length in 1 to 4 bytes.
    @Test(arguments: [(0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]),
                      (16_384, [0x80, 0x80, 0x01]), (2_097_151, [0xFF, 0xFF, 0x7F]), (2_097_152, [0x80, 0x80, 0x80, 0x01])])
    func remainingLengthBytes(length: Int, expected: [UInt8]) throws {
        var payload = ByteBuffer()
        // PUBLISH QoS 0 with a one-letter topic: 3 bytes of topic, the rest payload.
        payload.writeRepeatingByte(0, count: max(0, length - 3))
        var buffer = ByteBuffer()
        guard length >= 3 else { return }
        MQTTPacket.publish(topic: "t", packetID: nil, payload: payload).encode(into: &buffer)
        #expect(Array(buffer.readableBytesView.dropFirst().prefix(expected.count)) == expected)
    }

    @Test func connectIsByteExact() {
        var buffer = ByteBuffer()
        MQTTPacket.connect(clientID: "c1", keepAlive: 60).encode(into: &buffer)
        #expect(Array(buffer.readableBytesView) == [0x10, 14, 0, 4, 0x4D, 0x51, 0x54, 0x54, 4, 0x02, 0, 60, 0, 2, 0x63, 0x31])
    }

    /// A QoS 1 PUBLISH and a PUBACK behind it, cut at every byte: each decodes once, whole.
    @Test func packetsSplitAtAnyByteDecodeOnce() throws {
        var wire = ByteBuffer()
        MQTTPacket.publish(topic: "a/b", packetID: 7, payload: ByteBuffer(string: "hello")).encode(into: &wire)
        MQTTPacket.puback(packetID: 9).encode(into: &wire)
        let bytes = Array(wire.readableBytesView)
        for cut in 0...bytes.count {
            var buffer = ByteBuffer()
            var packets: [MQTTPacket] = []
            for part in [bytes[..<cut], bytes[cut...]] {
                buffer.writeBytes(part)
                while let packet = try MQTTPacket.decode(from: &buffer) { packets.append(packet) }
            }
            #expect(packets == [.publish(topic: "a/b", packetID: 7, payload: ByteBuffer(string: "hello")), .puback(packetID: 9)],
                    "cut at \(cut)")
        }
    }

    @Test func aFiveByteLengthIsRefused() {
        var buffer = ByteBuffer(bytes: [0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(throws: MQTTError.malformedLength) { _ = try MQTTPacket.decode(from: &buffer) }
    }
}

@Suite struct MosquittoLoadTests {
    /// The real broker: 2 pairs x 4 in flight for a second; every message arrives once.
    @Test func aShortRunThroughMosquittoLosesNothing() async throws {
        let broker: MosquittoProcess
        do {
            broker = try await MosquittoProcess.start()
        } catch MQTTError.unexpected(let why) where why.hasPrefix("mosquitto not found") {
            print("skipped: \(why)")
            return
        }
        let result = try await MQTTLoad.run(LoadPattern(pairs: 2, window: 4, payloadBytes: 64, duration: 1, warmup: 0.2),
                                            host: "127.0.0.1", port: broker.port, group: MultiThreadedEventLoopGroup.singleton)
        await broker.stop()
        #expect(result.received > 0)
        #expect(result.received == result.sent)
        #expect(result.lost == 0 && result.duplicates == 0 && result.errors.isEmpty)
        #expect(result.sendToReceive.totalCount > 0 && result.sendToAck.totalCount > 0)
    }
}
