import MQTTLoad
import NIOCore
import NIOPosix
import Testing

@Suite struct MQTTPacketTests {
    /// MQTT 3.1.1 section 2.2.3: the remaining length in 1 to 4 bytes, seven bits each, low first.
    @Test(arguments: [(0, [0x00]), (127, [0x7F]), (128, [0x80, 0x01]), (16_383, [0xFF, 0x7F]),
                      (16_384, [0x80, 0x80, 0x01]), (2_097_151, [0xFF, 0xFF, 0x7F]), (2_097_152, [0x80, 0x80, 0x80, 0x01])])
    func remainingLength(length: Int, expected: [UInt8]) throws {
        // PINGRESP for 0; otherwise a QoS 0 PUBLISH with a one-letter topic (3 bytes) and the rest payload.
        let packet: MQTTPacket = length == 0
            ? .pingresp
            : .publish(topic: "t", packetID: nil, payload: ByteBuffer(repeating: 0x2A, count: length - 3))
        var wire = ByteBuffer()
        packet.encode(into: &wire)
        #expect(Array(wire.readableBytesView.dropFirst().prefix(expected.count)) == expected)
        #expect(wire.readableBytes == 1 + expected.count + length)
        #expect(wire.readableBytes == packet.encodedLength)
        #expect(try MQTTPacket.decode(from: &wire) == packet)
        #expect(wire.readableBytes == 0)
    }

    /// Section 3.1: protocol name "MQTT", level 4, clean session, keep-alive, client id.
    @Test func connectIsByteExact() {
        #expect(bytes(.connect(clientID: "c1", keepAlive: 60))
            == [0x10, 14, 0, 4, 0x4D, 0x51, 0x54, 0x54, 4, 0x02, 0, 60, 0, 2, 0x63, 0x31])
    }

    /// Section 3.8: the reserved flags 0b0010, packet id, topic filter, requested QoS.
    @Test func subscribeIsByteExact() {
        #expect(bytes(.subscribe(packetID: 1, topic: "a/b", qos: 1)) == [0x82, 8, 0, 1, 0, 3, 0x61, 0x2F, 0x62, 1])
    }

    /// Section 3.3: QoS in bits 1-2 of the header, the packet id only at QoS 1 and 2.
    @Test func publishIsByteExact() {
        #expect(bytes(.publish(topic: "t", packetID: 0x0102, payload: ByteBuffer(string: "hi")))
            == [0x32, 7, 0, 1, 0x74, 0x01, 0x02, 0x68, 0x69])
        #expect(bytes(.publish(topic: "t", packetID: nil, payload: ByteBuffer(string: "hi")))
            == [0x30, 5, 0, 1, 0x74, 0x68, 0x69])
    }

    @Test func pubackAndDisconnectAreByteExact() {
        #expect(bytes(.puback(packetID: 0xBEEF)) == [0x40, 2, 0xBE, 0xEF])
        #expect(bytes(.disconnect) == [0xE0, 0])
    }

    @Test func brokerPacketsDecode() throws {
        #expect(try decodeAll([0x20, 2, 0, 0]) == [.connack(sessionPresent: false, returnCode: 0)])
        #expect(try decodeAll([0x20, 2, 1, 5]) == [.connack(sessionPresent: true, returnCode: 5)])
        #expect(try decodeAll([0x90, 3, 0, 1, 0x80]) == [.suback(packetID: 1, returnCodes: [0x80])])
        #expect(try decodeAll([0x40, 2, 0, 9, 0xD0, 0]) == [.puback(packetID: 9), .pingresp])
    }

    /// A QoS 1 PUBLISH and a PUBACK behind it, cut at every byte: each decodes once, whole.
    @Test func packetsSplitAtAnyByteDecodeOnce() throws {
        var wire = ByteBuffer()
        MQTTPacket.publish(topic: "a/b", packetID: 7, payload: ByteBuffer(string: "hello")).encode(into: &wire)
        MQTTPacket.puback(packetID: 9).encode(into: &wire)
        let bytes = Array(wire.readableBytesView)
        let expected: [MQTTPacket] = [.publish(topic: "a/b", packetID: 7, payload: ByteBuffer(string: "hello")), .puback(packetID: 9)]
        for cut in 0...bytes.count {
            #expect(try decodeAll(Array(bytes[..<cut]), Array(bytes[cut...])) == expected, "cut at \(cut)")
        }
        #expect(try decodeAll(bytes.map { [$0] }) == expected, "a byte at a time")
    }

    /// A length split after its continuation byte waits for the rest instead of misreading it.
    @Test func aLengthSplitAcrossReadsWaits() throws {
        let packet = MQTTPacket.publish(topic: "t", packetID: 1, payload: ByteBuffer(repeating: 1, count: 200))
        let bytes = Array(ByteBuffer(bytes: self.bytes(packet)).readableBytesView)
        var buffer = ByteBuffer(bytes: bytes.prefix(2))
        #expect(try MQTTPacket.decode(from: &buffer) == nil)
        #expect(buffer.readableBytes == 2)
        buffer.writeBytes(bytes.dropFirst(2))
        #expect(try MQTTPacket.decode(from: &buffer) == packet)
    }

    @Test func aFiveByteLengthIsRefused() {
        var buffer = ByteBuffer(bytes: [0x30, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])
        #expect(throws: MQTTError.malformedLength) { _ = try MQTTPacket.decode(from: &buffer) }
    }

    @Test func malformedPacketsAreRefused() {
        for wire: [UInt8] in [
            [0x36, 5, 0, 1, 0x74, 0, 1],   // PUBLISH with QoS 3
            [0x40, 3, 0, 1, 0],            // PUBACK of 3 bytes
            [0x41, 2, 0, 1],               // PUBACK with a reserved flag
            [0x20, 1, 0],                  // CONNACK of 1 byte
            [0x32, 1, 0],                  // PUBLISH whose topic length is cut off
        ] {
            var buffer = ByteBuffer(bytes: wire)
            #expect(throws: MQTTError.self, "\(wire)") { _ = try MQTTPacket.decode(from: &buffer) }
        }
    }

    @Test func aRefusedConnectionSaysWhy() {
        #expect(MQTTError.connectionRefused(returnCode: 5).description.contains("return code 5 (not authorized)"))
    }

    private func bytes(_ packet: MQTTPacket) -> [UInt8] {
        var buffer = ByteBuffer()
        packet.encode(into: &buffer)
        return Array(buffer.readableBytesView)
    }

    /// The packets in `reads`, fed one after the other into one buffer as a connection would.
    private func decodeAll(_ reads: [UInt8]...) throws -> [MQTTPacket] { try decodeAll(reads) }

    private func decodeAll(_ reads: [[UInt8]]) throws -> [MQTTPacket] {
        var buffer = ByteBuffer()
        var packets: [MQTTPacket] = []
        for read in reads {
            buffer.writeBytes(read)
            while let packet = try MQTTPacket.decode(from: &buffer) { packets.append(packet) }
        }
        return packets
    }
}

@Suite struct MosquittoLoadTests {
    /// The real broker: 2 pairs x 4 in flight for a second; every message arrives once.
    @Test(.enabled(if: MosquittoProcess.executable() != nil, "mosquitto is not installed (apt-get install mosquitto)"))
    func aShortRunThroughMosquittoLosesNothing() async throws {
        let broker = try await MosquittoProcess.start()
        let result: MQTTLoadResult
        do {
            result = try await MQTTLoad.run(LoadPattern(pairs: 2, window: 4, payloadBytes: 64, duration: 1, warmup: 0.2),
                                            host: "127.0.0.1", port: broker.port, group: MultiThreadedEventLoopGroup.singleton)
        } catch {
            await broker.stop()
            throw error
        }
        await broker.stop()
        #expect(!broker.wasKilled, "mosquitto should stop on SIGTERM, not wait for the SIGKILL")
        #expect(result.received > 0)
        #expect(result.received == result.sent)
        #expect(result.lost == 0 && result.duplicates == 0 && result.errors.isEmpty, "\(result.errors)")
        #expect(result.sendToReceive.totalCount > 0 && result.sendToAck.totalCount > 0)
    }

    /// Nothing listening: the run fails at once with the reason, instead of hanging.
    @Test func noBrokerFailsTheRun() async throws {
        let port = try await LocalPorts.free()
        await #expect(throws: MQTTError.self) {
            _ = try await MQTTLoad.run(LoadPattern(pairs: 2, window: 1, duration: 1),
                                       host: "127.0.0.1", port: port, group: MultiThreadedEventLoopGroup.singleton)
        }
    }
}
