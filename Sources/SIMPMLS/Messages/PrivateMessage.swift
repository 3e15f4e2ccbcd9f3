/// RFC 9420 section 6.3:
///
///     struct {
///         opaque group_id<V>;
///         uint64 epoch;
///         ContentType content_type;
///         opaque authenticated_data<V>;
///         opaque encrypted_sender_data<V>;
///         opaque ciphertext<V>;
///     } PrivateMessage;
public struct PrivateMessage: Sendable, Equatable, MLSCodable {
    public var groupID: [UInt8]
    public var epoch: UInt64
    public var contentType: ContentType
    public var authenticatedData: [UInt8]
    public var encryptedSenderData: [UInt8]
    /// The sealed ``PrivateMessageContent``.
    public var ciphertext: [UInt8]

    public init(
        groupID: [UInt8], epoch: UInt64, contentType: ContentType, authenticatedData: [UInt8],
        encryptedSenderData: [UInt8], ciphertext: [UInt8]
    ) {
        self.groupID = groupID
        self.epoch = epoch
        self.contentType = contentType
        self.authenticatedData = authenticatedData
        self.encryptedSenderData = encryptedSenderData
        self.ciphertext = ciphertext
    }

    public init(from reader: inout TLSReader) throws {
        groupID = try reader.readOpaque()
        epoch = try reader.readUInt64()
        contentType = try reader.readEnum(ContentType.self)
        authenticatedData = try reader.readOpaque()
        encryptedSenderData = try reader.readOpaque()
        ciphertext = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(groupID)
        writer.writeUInt64(epoch)
        try contentType.encode(to: &writer)
        try writer.writeOpaque(authenticatedData)
        try writer.writeOpaque(encryptedSenderData)
        try writer.writeOpaque(ciphertext)
    }
}

/// RFC 9420 section 6.3.1, the plaintext of a ``PrivateMessage``'s ciphertext:
///
///     struct {
///         select (PrivateMessage.content_type) { ... };
///         FramedContentAuthData auth;
///         opaque padding[length_of_padding];
///     } PrivateMessageContent;
///
/// The padding is every byte after `auth`, and each "MUST be set to zero" (receivers "MUST
/// verify that there are no non-zero bytes in the padding field"): a non-zero byte is
/// ``MLSDecodingError/nonZeroPadding``.
public struct PrivateMessageContent: Sendable, Equatable {
    public var content: MessageContent
    public var auth: FramedContentAuthData
    /// The number of zero bytes of padding.
    public var paddingLength: Int

    public init(content: MessageContent, auth: FramedContentAuthData, paddingLength: Int) {
        self.content = content
        self.auth = auth
        self.paddingLength = paddingLength
    }

    /// Decodes a whole decrypted plaintext whose content type the enclosing message gives.
    public init(decoding plaintext: [UInt8], contentType: ContentType) throws {
        var reader = TLSReader(plaintext)
        content = try MessageContent(from: &reader, contentType: contentType)
        auth = try FramedContentAuthData(from: &reader, contentType: contentType)
        let padding = try reader.readBytes(count: reader.remaining)
        guard padding.allSatisfy({ $0 == 0 }) else { throw MLSDecodingError.nonZeroPadding }
        paddingLength = padding.count
    }

    public func encoded() throws -> [UInt8] {
        guard paddingLength >= 0 else { throw MLSEncodingError.inconsistent("negative padding") }
        var w = TLSWriter()
        try content.encodeBody(to: &w)
        try auth.encode(to: &w, contentType: content.contentType)
        w.writeBytes([UInt8](repeating: 0, count: paddingLength))
        return w.bytes
    }
}

/// RFC 9420 section 6.3.2, the plaintext of `encrypted_sender_data`:
///
///     struct {
///         uint32 leaf_index;
///         uint32 generation;
///         opaque reuse_guard[4];
///     } SenderData;
public struct SenderData: Sendable, Equatable, MLSCodable {
    public var leafIndex: UInt32
    public var generation: UInt32
    /// Exactly 4 bytes.
    public var reuseGuard: [UInt8]

    public init(leafIndex: UInt32, generation: UInt32, reuseGuard: [UInt8]) {
        self.leafIndex = leafIndex
        self.generation = generation
        self.reuseGuard = reuseGuard
    }

    public init(from reader: inout TLSReader) throws {
        leafIndex = try reader.readUInt32()
        generation = try reader.readUInt32()
        reuseGuard = try reader.readBytes(count: 4)
    }

    public func encode(to writer: inout TLSWriter) throws {
        guard reuseGuard.count == 4 else { throw MLSEncodingError.inconsistent("reuse_guard is 4 bytes") }
        writer.writeUInt32(leafIndex)
        writer.writeUInt32(generation)
        writer.writeBytes(reuseGuard)
    }
}
