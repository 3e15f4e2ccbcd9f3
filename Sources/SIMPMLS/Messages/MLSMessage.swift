/// RFC 9420 section 6, every message on the wire:
///
///     struct {
///         ProtocolVersion version = mls10;
///         WireFormat wire_format;
///         select (MLSMessage.wire_format) {
///             case mls_public_message:  PublicMessage public_message;
///             case mls_private_message: PrivateMessage private_message;
///             case mls_welcome:         Welcome welcome;
///             case mls_group_info:      GroupInfo group_info;
///             case mls_key_package:     KeyPackage key_package;
///         };
///     } MLSMessage;
///
/// A version other than mls10 or an unknown wire format is an error. Group infos and key
/// packages are as received (``GroupInfoIn``, ``KeyPackageIn``): unchecked.
public enum MLSMessage: Sendable, Equatable, MLSCodable {
    case publicMessage(PublicMessage)
    case privateMessage(PrivateMessage)
    case welcome(Welcome)
    case groupInfo(GroupInfoIn)
    case keyPackage(KeyPackageIn)

    public var wireFormat: WireFormat {
        switch self {
        case .publicMessage: .publicMessage
        case .privateMessage: .privateMessage
        case .welcome: .welcome
        case .groupInfo: .groupInfo
        case .keyPackage: .keyPackage
        }
    }

    public init(from reader: inout TLSReader) throws {
        _ = try reader.readEnum(ProtocolVersion.self)
        switch try reader.readEnum(WireFormat.self) {
        case .publicMessage: self = .publicMessage(try PublicMessage(from: &reader))
        case .privateMessage: self = .privateMessage(try PrivateMessage(from: &reader))
        case .welcome: self = .welcome(try Welcome(from: &reader))
        case .groupInfo: self = .groupInfo(try GroupInfoIn(from: &reader))
        case .keyPackage: self = .keyPackage(try KeyPackageIn(from: &reader))
        }
    }

    public func encode(to writer: inout TLSWriter) throws {
        try ProtocolVersion.mls10.encode(to: &writer)
        try wireFormat.encode(to: &writer)
        switch self {
        case .publicMessage(let m): try m.encode(to: &writer)
        case .privateMessage(let m): try m.encode(to: &writer)
        case .welcome(let m): try m.encode(to: &writer)
        case .groupInfo(let m): try m.encode(to: &writer)
        case .keyPackage(let m): try m.encode(to: &writer)
        }
    }
}
