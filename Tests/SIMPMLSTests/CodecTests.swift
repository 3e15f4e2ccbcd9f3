import SIMPMLS
import Testing

/// A struct of two `opaque<V>` fields, like RFC 9420's `HPKECiphertext`.
struct Pair: MLSCodable, Equatable {
    let first: [UInt8]
    let second: [UInt8]
    init(first: [UInt8], second: [UInt8]) {
        self.first = first
        self.second = second
    }
    init(from reader: inout TLSReader) throws {
        first = try reader.readOpaque()
        second = try reader.readOpaque()
    }
    func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(first)
        try writer.writeOpaque(second)
    }
}

/// RFC 9420 section 2.1 codec, section 2.1.2 variable-length integers: strict decoding.
@Suite struct CodecTests {
    func decodeVarint(_ bytes: [UInt8]) throws -> Int {
        var r = TLSReader(bytes)
        let v = try r.readVarint()
        try r.finish()
        return v
    }

    @Test(arguments: [0, 1, 63, 64, 16383, 16384, 494_878_333, (1 << 30) - 1])
    func varintsRoundTripInTheirShortestForm(value: Int) throws {
        let encoded = try MLSVarint.encode(value)
        #expect(encoded.count == (value < 64 ? 1 : value < 16384 ? 2 : 4))
        #expect(try decodeVarint(encoded) == value)
    }

    @Test func varintsDecodeTheRFC9000Examples() throws {
        #expect(try decodeVarint([0x25]) == 37)
        #expect(try decodeVarint([0x7B, 0xBD]) == 15293)
        #expect(try decodeVarint([0x9D, 0x7F, 0x3E, 0x7D]) == 494_878_333)
    }

    /// `writeVector` writes its body in place and moves it up when the length needs 2 or 4
    /// bytes: the result is the shortest varint of the length, then the body, also nested.
    @Test(arguments: [0, 1, 63, 64, 65, 16_383, 16_384, 70_000])
    func aVectorWrittenInPlaceIsItsLengthThenItsBody(length: Int) throws {
        let body = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var w = TLSWriter()
        w.writeUInt8(0xAA)
        try w.writeVector { v in
            v.writeBytes(Array(body.prefix(length / 2)))
            try v.writeVector { inner in inner.writeBytes(Array(body.dropFirst(length / 2))) }
        }
        w.writeUInt8(0xBB)
        let inner = try MLSVarint.encode(length - length / 2) + Array(body.dropFirst(length / 2))
        let outer = Array(body.prefix(length / 2)) + inner
        #expect(w.bytes == [0xAA] + (try MLSVarint.encode(outer.count)) + outer + [0xBB])
        var plain = TLSWriter()
        try plain.writeVarint(length)
        #expect(plain.bytes == (try MLSVarint.encode(length)))
    }

    @Test func aLengthOf2To30CannotBeEncoded() {
        #expect(throws: MLSEncodingError.lengthTooLarge(1 << 30)) { try MLSVarint.encode(1 << 30) }
        #expect(throws: MLSEncodingError.lengthTooLarge(-1)) { try MLSVarint.encode(-1) }
    }

    @Test(arguments: [[0x40, 0x25], [0x40, 0x00], [0x80, 0x00, 0x00, 0x25], [0x80, 0x00, 0x3F, 0xFF]] as [[UInt8]])
    func aNonMinimalVarintIsAnError(bytes: [UInt8]) {
        #expect(throws: MLSDecodingError.nonMinimalVarint) { try decodeVarint(bytes) }
    }

    @Test func theReservedVarintPrefixIsAnError() {
        #expect(throws: MLSDecodingError.invalidVarintPrefix) { try decodeVarint([0xC0, 0, 0, 0, 0, 0, 0, 0x25]) }
    }

    @Test func aTruncatedVarintIsAnError() {
        #expect(throws: MLSDecodingError.truncated(needed: 1, available: 0)) { try decodeVarint([0x80, 0x01, 0x00]) }
        #expect(throws: MLSDecodingError.truncated(needed: 1, available: 0)) { try decodeVarint([]) }
    }

    @Test func aLengthThatOverrunsTheInputIsAnError() {
        var r = TLSReader([0x05, 1, 2, 3])
        #expect(throws: MLSDecodingError.truncated(needed: 5, available: 3)) { try r.readOpaque() }
        // The largest length a varint can say, with nothing behind it.
        var big = TLSReader([0xBF, 0xFF, 0xFF, 0xFF])
        #expect(throws: MLSDecodingError.truncated(needed: (1 << 30) - 1, available: 0)) { try big.readOpaque() }
        var v = TLSReader([0x04, 0, 0])
        #expect(throws: MLSDecodingError.truncated(needed: 4, available: 2)) { try v.readVector(of: NodeType.self) }
    }

    @Test func anElementRunningPastItsVectorIsAnError() {
        // A vector of 3 bytes holding uint16s: the second element has one byte inside the vector.
        var r = TLSReader([0x03, 0x00, 0x01, 0x00, 0x02])
        #expect(throws: MLSDecodingError.truncated(needed: 2, available: 1)) {
            try r.readVector { try $0.readUInt16() }
        }
    }

    @Test func trailingBytesAfterAWholeValueAreAnError() throws {
        let value = Pair(first: [1, 2], second: [3])
        let encoded = try value.mlsEncoded()
        #expect(encoded == [0x02, 1, 2, 0x01, 3])
        #expect(try Pair(mlsDecoding: encoded) == value)
        #expect(throws: MLSDecodingError.trailingBytes(count: 1)) { try Pair(mlsDecoding: encoded + [0]) }
    }

    @Test func everyProperPrefixOfAnEncodingFails() throws {
        let items = [Pair(first: Array(repeating: 7, count: 70), second: [1, 2, 3]),
                     Pair(first: [], second: [])]
        var w = TLSWriter()
        try w.writeVector(items)
        let encoded = w.bytes
        for n in 0..<encoded.count {
            var r = TLSReader(Array(encoded.prefix(n)))
            #expect(throws: MLSDecodingError.self) { try r.readVector(of: Pair.self) }
        }
        var r = TLSReader(encoded)
        #expect(try r.readVector(of: Pair.self) == items)
        try r.finish()
    }

    @Test(arguments: [0, 4, 255] as [UInt8])
    func anUnknownContentTypeIsAnError(raw: UInt8) {
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ContentType", value: UInt64(raw))) {
            try ContentType(mlsDecoding: [raw])
        }
    }

    @Test func closedEnumsRoundTrip() throws {
        #expect(try ContentType(mlsDecoding: [3]) == .commit)
        #expect(try NodeType(mlsDecoding: [2]) == .parent)
        #expect(try ProtocolVersion(mlsDecoding: [0, 1]) == .mls10)
        #expect(try ProtocolVersion.mls10.mlsEncoded() == [0, 1])
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "ProtocolVersion", value: 0x0100)) {
            try ProtocolVersion(mlsDecoding: [1, 0])
        }
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "SenderType", value: 0)) { try SenderType(mlsDecoding: [0]) }
        #expect(throws: MLSDecodingError.unknownEnumValue(type: "LeafNodeSource", value: 4)) { try LeafNodeSource(mlsDecoding: [4]) }
    }

    @Test func integersAreBigEndian() throws {
        var w = TLSWriter()
        w.writeUInt8(0x01)
        w.writeUInt16(0x0203)
        w.writeUInt32(0x0405_0607)
        w.writeUInt64(0x0809_0A0B_0C0D_0E0F)
        #expect(w.bytes == Array(1...15))
        var r = TLSReader(w.bytes)
        #expect(try r.readUInt8() == 0x01)
        #expect(try r.readUInt16() == 0x0203)
        #expect(try r.readUInt32() == 0x0405_0607)
        #expect(try r.readUInt64() == 0x0809_0A0B_0C0D_0E0F)
        try r.finish()
        var short = TLSReader([1, 2, 3])
        #expect(throws: MLSDecodingError.truncated(needed: 4, available: 3)) { try short.readUInt32() }
    }

    @Test func optionalsHaveAPresenceByteOfZeroOrOne() throws {
        var w = TLSWriter()
        try w.writeOptional(UInt16(5)) { $0.writeUInt16($1) }
        try w.writeOptional(UInt16?.none) { $0.writeUInt16($1) }
        #expect(w.bytes == [1, 0, 5, 0])
        var r = TLSReader(w.bytes)
        #expect(try r.readOptional { try $0.readUInt16() } == 5)
        #expect(try r.readOptional { try $0.readUInt16() } == nil)
        var bad = TLSReader([2, 0, 5])
        #expect(throws: MLSDecodingError.invalidOptionalPresence(2)) { try bad.readOptional { try $0.readUInt16() } }
    }

    @Test func opaqueVectorsRoundTripAcrossVarintWidths() throws {
        for count in [0, 63, 64, 16383, 16384] {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0) }
            var w = TLSWriter()
            try w.writeOpaque(bytes)
            #expect(w.bytes.count == count + (count < 64 ? 1 : count < 16384 ? 2 : 4))
            var r = TLSReader(w.bytes)
            #expect(try r.readOpaque() == bytes)
            try r.finish()
        }
    }

    /// Seeded random inputs: decoding either succeeds or throws; it never traps.
    @Test func randomInputNeverTraps() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        for _ in 0..<5000 {
            let bytes = (0..<Int(next() % 24)).map { _ in UInt8(truncatingIfNeeded: next()) }
            var r = TLSReader(bytes)
            _ = try? r.readVector(of: Pair.self)
            _ = try? Pair(mlsDecoding: bytes)
            var o = TLSReader(bytes)
            _ = try? o.readOptional { try $0.readVector(of: ContentType.self) }
        }
    }
}
