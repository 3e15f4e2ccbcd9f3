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
