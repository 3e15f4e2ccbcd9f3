import Crypto
import NIOCore
import SIMPCore
import Testing

@Suite struct DatagramSealTests {
    let key = DatagramSeal.newKey()
    let header = DatagramHeader(kind: .data, sessionID: 42, packetNumber: 7)

    func sealed(_ payload: [UInt8] = Array("hello".utf8)) throws -> [UInt8] {
        Array(try DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer).readableBytesView)
    }

    func open(_ bytes: [UInt8], key: SymmetricKey? = nil, direction: DatagramDirection = .toServer) throws -> [UInt8] {
        var buffer = ByteBuffer(bytes: bytes)
        let h = try Datagram.decodeHeader(&buffer)
        return try DatagramSeal.open(h, sealed: buffer, key: key ?? self.key, direction: direction)
    }

    @Test func roundTripAddsOnlyTheTag() throws {
        let bytes = try sealed()
        #expect(bytes.count == DatagramHeader.size + 5 + DatagramSeal.tagSize)
        #expect(try open(bytes) == Array("hello".utf8))
        #expect(!bytes.suffix(21).starts(with: Array("hello".utf8)), "payload is not in clear")
    }

    @Test func tamperedCiphertextTagOrHeaderIsRejected() throws {
        let bytes = try sealed()
        for index in [DatagramHeader.size, bytes.count - 1, 3, 12] {
            var tampered = bytes
            tampered[index] ^= 0x01
            #expect(throws: (any Error).self) { try open(tampered) }
        }
    }

    @Test func wrongKeyOrDirectionIsRejected() throws {
        let bytes = try sealed()
        #expect(throws: DatagramError.unsealable) { try open(bytes, key: DatagramSeal.newKey()) }
        #expect(throws: DatagramError.unsealable) { try open(bytes, direction: .toClient) }
    }

    @Test func truncatedDatagramIsRejected() throws {
        let bytes = try sealed([])
        #expect(throws: (any Error).self) { try open(Array(bytes.dropLast(1))) }
    }
}

@Suite struct ReplayWindowTests {
    /// Feeds the numbers in order and returns which were accepted.
    func accepted(_ numbers: [UInt64]) -> [Bool] {
        var w = ReplayWindow()
        return numbers.map { w.accept($0) }
    }

    @Test func eachNumberOnce() {
        #expect(accepted([1, 1, 3, 2, 2, 0]) == [true, false, true, true, false, false])
    }

    @Test func tooOldIsRejected() {
        // 37 is 63 behind 100 (inside), 36 is 64 behind (outside); after 1000, 100 is far too old.
        #expect(accepted([100, 37, 36, 1000, 100]) == [true, true, false, true, false])
    }
}
