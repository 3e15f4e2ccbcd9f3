import NIOCore
import SIMPCore
import Testing

@Suite struct DatagramTests {
    @Test func headerRoundTripsAndLeavesPayload() throws {
        let header = DatagramHeader(kind: .data, sessionID: 0x0102030405060708, packetNumber: 99)
        var buffer = try Datagram.encode(header, payload: [1, 2, 3])
        #expect(buffer.readableBytes == DatagramHeader.size + 3)
        #expect(Array(buffer.readableBytesView.prefix(4)) == [1, 2, 0, 0])
        let decoded = try Datagram.decodeHeader(&buffer)
        #expect(decoded == header)
        #expect(Array(buffer.readableBytesView) == [1, 2, 3])
    }

    @Test func shortDatagramIsRejected() {
        var buffer = ByteBuffer(bytes: [1, 2, 3])
        #expect(throws: DatagramError.tooShort(3)) { try Datagram.decodeHeader(&buffer) }
    }

    @Test func wrongVersionIsRejected() {
        var buffer = ByteBuffer(bytes: [9, 2] + [UInt8](repeating: 0, count: 18))
        #expect(throws: DatagramError.badVersion(9)) { try Datagram.decodeHeader(&buffer) }
    }

    @Test func unknownKindIsRejected() {
        var buffer = ByteBuffer(bytes: [1, 77] + [UInt8](repeating: 0, count: 18))
        #expect(throws: DatagramError.unknownKind(77)) { try Datagram.decodeHeader(&buffer) }
    }

    @Test func payloadOverBudgetIsRefusedBothWays() {
        let big = [UInt8](repeating: 0, count: DatagramHeader.maxPayload + 1)
        let header = DatagramHeader(kind: .data, sessionID: 1, packetNumber: 1)
        #expect(throws: DatagramError.payloadTooLarge(big.count)) { try Datagram.encode(header, payload: big) }
        let sealedTooBig = big + [UInt8](repeating: 0, count: DatagramSeal.tagSize)
        var buffer = ByteBuffer(bytes: [1, 2] + [UInt8](repeating: 0, count: 18) + sealedTooBig)
        #expect(throws: DatagramError.payloadTooLarge(sealedTooBig.count)) { try Datagram.decodeHeader(&buffer) }
    }

    @Test func payloadAtBudgetIsAccepted() throws {
        let payload = [UInt8](repeating: 7, count: DatagramHeader.maxPayload)
        var buffer = try Datagram.encode(DatagramHeader(kind: .data, sessionID: 1, packetNumber: 1), payload: payload)
        _ = try Datagram.decodeHeader(&buffer)
        #expect(buffer.readableBytes == DatagramHeader.maxPayload)
    }
}
