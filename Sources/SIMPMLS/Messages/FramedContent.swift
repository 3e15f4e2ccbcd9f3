/// The `content_type`-dependent part of ``FramedContent`` and ``PrivateMessageContent``
/// (RFC 9420 section 6):
///
///     select (FramedContent.content_type) {
///         case application: opaque application_data<V>;
///         case proposal:    Proposal proposal;
///         case commit:      Commit commit;
///     };
///
/// Its content type is written before it in `FramedContent`, and in the enclosing
/// `PrivateMessage` for `PrivateMessageContent`, so it is read and written without it.
public enum MessageContent: Sendable, Equatable {
    case application([UInt8])
    case proposal(Proposal)
    case commit(Commit)

    public var contentType: ContentType {
        switch self {
        case .application: .application
        case .proposal: .proposal
        case .commit: .commit
        }
    }

    init(from reader: inout TLSReader, contentType: ContentType) throws {
        switch contentType {
        case .application: self = .application(try reader.readOpaque())
        case .proposal: self = .proposal(try Proposal(from: &reader))
        case .commit: self = .commit(try Commit(from: &reader))
        }
    }

    func encodeBody(to writer: inout TLSWriter) throws {
        switch self {
        case .application(let data): try writer.writeOpaque(data)
        case .proposal(let proposal): try proposal.encode(to: &writer)
        case .commit(let commit): try commit.encode(to: &writer)
        }
    }
}

/// RFC 9420 section 6:
///
///     struct {
///         opaque group_id<V>;
///         uint64 epoch;
///         Sender sender;
///         opaque authenticated_data<V>;
///         ContentType content_type;
///         select (FramedContent.content_type) { ... };
///     } FramedContent;
public struct FramedContent: Sendable, Equatable, MLSCodable {
    public var groupID: [UInt8]
    public var epoch: UInt64
    public var sender: Sender
    public var authenticatedData: [UInt8]
    public var content: MessageContent

    public var contentType: ContentType { content.contentType }

    public init(groupID: [UInt8], epoch: UInt64, sender: Sender, authenticatedData: [UInt8], content: MessageContent) {
        self.groupID = groupID
        self.epoch = epoch
        self.sender = sender
        self.authenticatedData = authenticatedData
        self.content = content
    }

    public init(from reader: inout TLSReader) throws {
        groupID = try reader.readOpaque()
        epoch = try reader.readUInt64()
        sender = try Sender(from: &reader)
        authenticatedData = try reader.readOpaque()
        content = try MessageContent(from: &reader, contentType: try reader.readEnum(ContentType.self))
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(groupID)
        writer.writeUInt64(epoch)
        try sender.encode(to: &writer)
        try writer.writeOpaque(authenticatedData)
        try contentType.encode(to: &writer)
        try content.encodeBody(to: &writer)
    }
}

/// RFC 9420 section 6.1:
///
///     struct {
///         /* SignWithLabel(., "FramedContentTBS", FramedContentTBS) */
///         opaque signature<V>;
///         select (FramedContent.content_type) {
///             case commit: MAC confirmation_tag;    /* opaque MAC<V> */
///             case application:
///             case proposal: struct{};
///         };
///     } FramedContentAuthData;
///
/// Read and written for a known content type: `confirmationTag` is present exactly for commits.
public struct FramedContentAuthData: Sendable, Equatable {
    public var signature: [UInt8]
    public var confirmationTag: [UInt8]?

    public init(signature: [UInt8], confirmationTag: [UInt8]?) {
        self.signature = signature
        self.confirmationTag = confirmationTag
    }

    public init(from reader: inout TLSReader, contentType: ContentType) throws {
        signature = try reader.readOpaque()
        confirmationTag = contentType == .commit ? try reader.readOpaque() : nil
    }

    public func encode(to writer: inout TLSWriter, contentType: ContentType) throws {
        guard (contentType == .commit) == (confirmationTag != nil) else {
            throw MLSEncodingError.inconsistent("a confirmation tag is present exactly for a commit")
        }
        try writer.writeOpaque(signature)
        if let confirmationTag { try writer.writeOpaque(confirmationTag) }
    }
}
