/// Closed enumerations of RFC 9420 whose value selects the rest of a structure: a value
/// without a case (including `reserved(0)`) cannot be decoded, so it is rejected.

/// RFC 9420 section 6: `enum { reserved(0), mls10(1), (65535) } ProtocolVersion;`
public enum ProtocolVersion: UInt16, MLSEnum, Sendable {
    case mls10 = 1
}

/// RFC 9420 section 6: `enum { reserved(0), application(1), proposal(2), commit(3), (255) } ContentType;`
public enum ContentType: UInt8, MLSEnum, Sendable {
    case application = 1
    case proposal = 2
    case commit = 3
}

/// RFC 9420 section 6: `enum { reserved(0), member(1), external(2), new_member_proposal(3),
/// new_member_commit(4), (255) } SenderType;`
public enum SenderType: UInt8, MLSEnum, Sendable {
    case member = 1
    case external = 2
    case newMemberProposal = 3
    case newMemberCommit = 4
}

/// RFC 9420 section 7.2: `enum { reserved(0), key_package(1), update(2), commit(3), (255) } LeafNodeSource;`
public enum LeafNodeSource: UInt8, MLSEnum, Sendable {
    case keyPackage = 1
    case update = 2
    case commit = 3
}

/// RFC 9420 section 7.8: `enum { reserved(0), leaf(1), parent(2), (255) } NodeType;`
public enum NodeType: UInt8, MLSEnum, Sendable {
    case leaf = 1
    case parent = 2
}

/// RFC 9420 section 6: `enum { reserved(0), mls_public_message(1), mls_private_message(2),
/// mls_welcome(3), mls_group_info(4), mls_key_package(5), (65535) } WireFormat;`
/// The registry is open (section 17.2), but an `MLSMessage` of a format without a case here
/// cannot be decoded, so it is rejected.
public enum WireFormat: UInt16, MLSEnum, Sendable {
    case publicMessage = 1
    case privateMessage = 2
    case welcome = 3
    case groupInfo = 4
    case keyPackage = 5
}
