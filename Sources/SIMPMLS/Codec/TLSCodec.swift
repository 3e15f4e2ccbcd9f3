/// The TLS presentation language as RFC 9420 uses it (section 2.1): big-endian fixed-width
/// integers, `opaque<V>` and vectors `T<V>` prefixed by a variable-length integer (section
/// 2.1.2), and `optional<T>` (section 2.1.1).
///
/// Decoding is strict: every malformed input is a thrown ``MLSDecodingError``, never a trap.
/// Lengths read from the input are checked against what remains before any slice is taken.

/// Why a byte string is not a valid encoding.
public enum MLSDecodingError: Error, Equatable, Sendable {
    /// The input ended before `needed` more bytes could be read (`available` were left).
    case truncated(needed: Int, available: Int)
    /// A variable-length integer starts with the prefix `0b11`, which RFC 9420 section 2.1.2
    /// reserves (no length of 2^30 or more is representable).
    case invalidVarintPrefix
    /// A variable-length integer was not written in its shortest form (RFC 9420 section 2.1.2:
    /// "the minimum number of bytes necessary").
    case nonMinimalVarint
    /// A whole value was decoded but bytes were left after it (`count` of them).
    case trailingBytes(count: Int)
    /// An enumerated value the RFC does not allow here.
    case unknownEnumValue(type: String, value: UInt64)
    /// `optional<T>`'s presence byte was neither 0 nor 1 (RFC 9420 section 2.1.1).
    case invalidOptionalPresence(UInt8)
    /// A value outside its type's constraints (for example a key of the wrong length).
    case invalidValue(String)
    /// A PrivateMessageContent's padding has a non-zero byte (RFC 9420 section 6.3.1: the
    /// enclosing PrivateMessage "MUST be rejected as malformed").
    case nonZeroPadding
}

/// Why a value cannot be encoded.
public enum MLSEncodingError: Error, Equatable, Sendable {
    /// RFC 9420 section 2.1.2: vectors are at most 2^30 - 1 bytes long.
    case lengthTooLarge(Int)
    /// The value's parts contradict each other, so its encoding would not decode (for example a
    /// commit's authentication data without a confirmation tag).
    case inconsistent(String)
}

/// A type with a TLS presentation language encoding.
public protocol MLSEncodable {
    func encode(to writer: inout TLSWriter) throws
}

/// A type decodable from the TLS presentation language. Implementations read exactly their
/// own bytes from `reader` and throw on anything malformed.
public protocol MLSDecodable {
    init(from reader: inout TLSReader) throws
}

public typealias MLSCodable = MLSEncodable & MLSDecodable

extension MLSEncodable {
    /// This value's encoding.
    public func mlsEncoded() throws -> [UInt8] {
        var writer = TLSWriter()
        try encode(to: &writer)
        return writer.bytes
    }
}

extension MLSDecodable {
    /// Decodes one whole value from `bytes`: trailing bytes are an error.
    public init(mlsDecoding bytes: [UInt8]) throws {
        var reader = TLSReader(bytes)
        self = try Self(from: &reader)
        try reader.finish()
    }
}

/// The variable-length integer of RFC 9420 section 2.1.2 (the QUIC encoding without the 8-byte
/// form): 1, 2 or 4 bytes, the top two bits of the first byte giving the length.
public enum MLSVarint {
    /// The largest value representable: 2^30 - 1.
    public static let maximum: UInt32 = (1 << 30) - 1

    /// The shortest encoding of `value`.
    public static func encode(_ value: Int) throws -> [UInt8] {
        guard value >= 0, value <= Int(maximum) else { throw MLSEncodingError.lengthTooLarge(value) }
        let v = UInt32(value)
        if v < 1 << 6 {
            return [UInt8(v)]
        } else if v < 1 << 14 {
            return [0x40 | UInt8(v >> 8), UInt8(v & 0xFF)]
        } else {
            return [0x80 | UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)]
        }
    }
}

/// Reads TLS-encoded values from a byte string, front to back.
public struct TLSReader: Sendable {
    private let bytes: [UInt8]
    /// Where the next read starts.
    public private(set) var offset: Int
    private let end: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
        self.end = bytes.count
    }

    private init(bytes: [UInt8], offset: Int, end: Int) {
        self.bytes = bytes
        self.offset = offset
        self.end = end
    }

    /// Bytes not yet read.
    public var remaining: Int { end - offset }

    /// Throws unless every byte has been read.
    public func finish() throws {
        guard remaining == 0 else { throw MLSDecodingError.trailingBytes(count: remaining) }
    }

    /// The next `count` bytes.
    public mutating func readBytes(count: Int) throws -> [UInt8] {
        guard count >= 0, count <= remaining else {
            throw MLSDecodingError.truncated(needed: count, available: remaining)
        }
        let slice = Array(bytes[offset..<(offset + count)])
        offset += count
        return slice
    }

    public mutating func readUInt8() throws -> UInt8 {
        guard remaining >= 1 else { throw MLSDecodingError.truncated(needed: 1, available: remaining) }
        let b = bytes[offset]
        offset += 1
        return b
    }

    private mutating func readBigEndian(width: Int) throws -> UInt64 {
        let raw = try readBytes(count: width)
        var value: UInt64 = 0
        for b in raw { value = (value << 8) | UInt64(b) }
        return value
    }

    public mutating func readUInt16() throws -> UInt16 { UInt16(truncatingIfNeeded: try readBigEndian(width: 2)) }
    public mutating func readUInt32() throws -> UInt32 { UInt32(truncatingIfNeeded: try readBigEndian(width: 4)) }
    public mutating func readUInt64() throws -> UInt64 { try readBigEndian(width: 8) }

    /// A variable-length integer (RFC 9420 section 2.1.2), rejecting the reserved prefix and
    /// non-minimal encodings.
    public mutating func readVarint() throws -> Int {
        let first = try readUInt8()
        let prefix = first >> 6
        var value = UInt32(first & 0x3F)
        switch prefix {
        case 0:
            return Int(value)
        case 1:
            value = (value << 8) | UInt32(try readUInt8())
            guard value >= 1 << 6 else { throw MLSDecodingError.nonMinimalVarint }
        case 2:
            for _ in 0..<3 { value = (value << 8) | UInt32(try readUInt8()) }
            guard value >= 1 << 14 else { throw MLSDecodingError.nonMinimalVarint }
        default:
            throw MLSDecodingError.invalidVarintPrefix
        }
        return Int(value)
    }

    /// `opaque data<V>`.
    public mutating func readOpaque() throws -> [UInt8] {
        let length = try readVarint()
        return try readBytes(count: length)
    }

    /// A vector `T data<V>`: its length in bytes, then elements read by `element` until exactly
    /// that many bytes are used. An element running past the vector's end is an error.
    public mutating func readVector<T>(_ element: (inout TLSReader) throws -> T) throws -> [T] {
        let length = try readVarint()
        guard length <= remaining else { throw MLSDecodingError.truncated(needed: length, available: remaining) }
        var inner = TLSReader(bytes: bytes, offset: offset, end: offset + length)
        var items: [T] = []
        while inner.remaining > 0 {
            items.append(try element(&inner))
        }
        offset += length
        return items
    }

    /// A vector of decodable values.
    public mutating func readVector<T: MLSDecodable>(of type: T.Type) throws -> [T] {
        try readVector { try T(from: &$0) }
    }

    /// `optional<T>` (RFC 9420 section 2.1.1): a presence byte, 0 or 1, then the value if 1.
    public mutating func readOptional<T>(_ value: (inout TLSReader) throws -> T) throws -> T? {
        switch try readUInt8() {
        case 0: return nil
        case 1: return try value(&self)
        case let other: throw MLSDecodingError.invalidOptionalPresence(other)
        }
    }

    /// An enumerated value of a closed enum: any value without a case is an error.
    public mutating func readEnum<E: MLSEnum>(_ type: E.Type) throws -> E {
        let raw = E.RawValue(truncatingIfNeeded: try readBigEndian(width: MemoryLayout<E.RawValue>.size))
        guard let value = E(rawValue: raw) else {
            throw MLSDecodingError.unknownEnumValue(type: String(describing: E.self), value: UInt64(raw))
        }
        return value
    }
}

/// An enum whose wire form is a fixed-width unsigned integer and whose unknown values are
/// rejected on decoding.
public protocol MLSEnum: RawRepresentable, MLSCodable where RawValue: FixedWidthInteger & UnsignedInteger {}

extension MLSEnum {
    public init(from reader: inout TLSReader) throws {
        self = try reader.readEnum(Self.self)
    }

    public func encode(to writer: inout TLSWriter) throws {
        writer.writeInteger(rawValue)
    }
}

/// Writes TLS-encoded values.
public struct TLSWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func writeBytes(_ raw: [UInt8]) { bytes.append(contentsOf: raw) }

    /// A big-endian unsigned integer of its type's width (uint8, uint16, uint32, uint64).
    public mutating func writeInteger<I: FixedWidthInteger & UnsignedInteger>(_ value: I) {
        let width = MemoryLayout<I>.size
        for i in stride(from: width - 1, through: 0, by: -1) {
            bytes.append(UInt8(truncatingIfNeeded: value >> (8 * i)))
        }
    }

    public mutating func writeUInt8(_ v: UInt8) { writeInteger(v) }
    public mutating func writeUInt16(_ v: UInt16) { writeInteger(v) }
    public mutating func writeUInt32(_ v: UInt32) { writeInteger(v) }
    public mutating func writeUInt64(_ v: UInt64) { writeInteger(v) }

    /// The shortest varint of `value` (RFC 9420 section 2.1.2), appended without an array of
    /// its own.
    public mutating func writeVarint(_ value: Int) throws {
        guard value >= 0, value <= Int(MLSVarint.maximum) else { throw MLSEncodingError.lengthTooLarge(value) }
        let v = UInt32(value)
        if v < 1 << 6 {
            bytes.append(UInt8(v))
        } else if v < 1 << 14 {
            bytes.append(0x40 | UInt8(v >> 8))
            bytes.append(UInt8(v & 0xFF))
        } else {
            bytes.append(0x80 | UInt8(v >> 24))
            bytes.append(UInt8((v >> 16) & 0xFF))
            bytes.append(UInt8((v >> 8) & 0xFF))
            bytes.append(UInt8(v & 0xFF))
        }
    }

    /// `opaque data<V>`.
    public mutating func writeOpaque(_ raw: [UInt8]) throws {
        try writeVarint(raw.count)
        bytes.append(contentsOf: raw)
    }

    /// A vector `T data<V>` whose elements `body` writes. The elements are written in place
    /// after a one-byte length; a longer length (a body of 64 bytes or more) moves them up by
    /// one or three bytes. No buffer of its own: encoding a ratchet tree writes thousands of
    /// small vectors. If `body` throws, what it wrote stays (as with any failed write).
    public mutating func writeVector(_ body: (inout TLSWriter) throws -> Void) throws {
        let header = bytes.count
        bytes.append(0)
        try body(&self)
        let length = bytes.count - header - 1
        guard length <= Int(MLSVarint.maximum) else { throw MLSEncodingError.lengthTooLarge(length) }
        let v = UInt32(length)
        if v < 1 << 6 {
            bytes[header] = UInt8(v)
        } else if v < 1 << 14 {
            bytes.insert(UInt8(v & 0xFF), at: header + 1)
            bytes[header] = 0x40 | UInt8(v >> 8)
        } else {
            bytes.insert(contentsOf: [UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)], at: header + 1)
            bytes[header] = 0x80 | UInt8(v >> 24)
        }
    }

    public mutating func writeVector<T: MLSEncodable>(_ items: [T]) throws {
        try writeVector { w in for item in items { try item.encode(to: &w) } }
    }

    /// `optional<T>` (RFC 9420 section 2.1.1).
    public mutating func writeOptional<T>(_ value: T?, _ body: (inout TLSWriter, T) throws -> Void) throws {
        if let value {
            writeUInt8(1)
            try body(&self, value)
        } else {
            writeUInt8(0)
        }
    }
}
