import Crypto

/// Hand-made MLS messages (RFC 9420 section 6) for tests and conformance checks that drive a
/// server's commit order, or send it sealed messages, without a group: the server reads a
/// commit's framing (its wire format, group id, epoch, sender and content type) and whether it
/// and its Welcomes decode (and a commit's path leaf, signed by the key it names), and only the
/// first four bytes of a private message, but cannot verify the rest, so a commit with a
/// made-up signature and tags, or a private message with random ciphertext, passes it. No
/// member would accept one. Encoded by hand, from the RFC's structs,
/// so that a check needs no MLS library.
public enum MLSFraming {
    /// An `MLSMessage` `mls_public_message` whose `FramedContent` is an empty commit (no
    /// proposals, no path) in `group` on `epoch` from the member at `leaf`, with a random
    /// 64-byte signature and random confirmation and membership tags (so two differ), or every
    /// byte of them `fill` (for a test vector). With `path`, the commit has an `UpdatePath`
    /// (section 12.4.1) whose leaf node (section 7.2, source `commit`) holds a basic credential
    /// of `path.identity` ("USER/DEVICE"), the signer's public key (or `path.claimedKey`, which
    /// the signature then does not verify under), a made-up encryption key and parent hash, and
    /// the signer's `SignWithLabel` over `LeafNodeTBS` (with `group` and `leaf`); no path nodes.
    /// With `newMember`, the sender is a `new_member_commit` (an external commit, section
    /// 12.4.3.2: no leaf index, no membership tag), its path leaf signed as at leaf 0.
    public static func commit(group: [UInt8], epoch: UInt64, leaf: UInt32 = 0, fill: UInt8? = nil, path: PathLeaf? = nil,
                              newMember: Bool = false) -> [UInt8] {
        let random = { (count: Int) in made(count, fill) }
        var out: [UInt8] = []
        uint16(1, &out)                      // version mls10
        uint16(1, &out)                      // wire_format mls_public_message
        opaque(group, &out)                  // group_id
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: epoch >> UInt64(shift))) }
        if newMember {
            out.append(4)                    // sender_type new_member_commit
        } else {
            out.append(1)                    // sender_type member
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: leaf >> UInt32(shift))) }
        }
        opaque([], &out)                     // authenticated_data
        out.append(3)                        // content_type commit
        opaque([], &out)                     // Commit.proposals: none
        if let path {
            out.append(1)                    // Commit.path: present
            var signed: [UInt8] = []         // LeafNode, all but its signature
            opaque(random(32), &signed)      // LeafNode.encryption_key
            opaque(path.claimedKey ?? Array(path.signer.publicKey.rawRepresentation), &signed) // LeafNode.signature_key
            uint16(1, &signed)               // Credential.credential_type basic
            opaque(path.identity, &signed)   // Credential.identity
            var capabilities: [UInt8] = []
            var versions: [UInt8] = []
            uint16(1, &versions)
            opaque(versions, &capabilities)  // versions: mls10
            var suites: [UInt8] = []
            uint16(1, &suites)
            opaque(suites, &capabilities)    // cipher_suites: 1
            opaque([], &capabilities)        // extensions
            opaque([], &capabilities)        // proposals
            var credentials: [UInt8] = []
            uint16(1, &credentials)
            opaque(credentials, &capabilities) // credentials: basic
            signed += capabilities
            signed.append(3)                 // leaf_node_source commit
            opaque(random(32), &signed)      // parent_hash
            opaque([], &signed)              // LeafNode.extensions
            // LeafNodeTBS (section 7.2): the fields above, then the group and the leaf.
            var tbs = signed
            opaque(group, &tbs)
            for shift in stride(from: 24, through: 0, by: -8) { tbs.append(UInt8(truncatingIfNeeded: leaf >> UInt32(shift))) }
            // SignWithLabel (section 5.1.2): SignContent { label<V> = "MLS 1.0 LeafNodeTBS", content<V> }.
            var content: [UInt8] = []
            opaque(Array("MLS 1.0 LeafNodeTBS".utf8), &content)
            opaque(tbs, &content)
            out += signed
            opaque((try? path.signer.signature(for: content)).map { [UInt8]($0) } ?? [], &out) // LeafNode.signature
            opaque([], &out)                 // UpdatePath.nodes: none
        } else {
            out.append(0)                    // Commit.path: absent
        }
        opaque(random(64), &out)             // signature
        opaque(random(32), &out)             // confirmation_tag
        if !newMember { opaque(random(32), &out) } // membership_tag (members only)
        return out
    }

    /// An `MLSMessage` `mls_group_info` (section 12.4.3) of cipher suite 1 describing `epoch` of
    /// `group`, with a made-up tree hash, transcript hash, confirmation tag and signature (by leaf
    /// 0; every made-up byte `fill`, if set), and no extensions: it decodes, and no joiner would
    /// take it.
    public static func groupInfo(group: [UInt8], epoch: UInt64, fill: UInt8? = nil) -> [UInt8] {
        var out: [UInt8] = []
        uint16(1, &out)                      // version mls10
        uint16(4, &out)                      // wire_format mls_group_info
        uint16(1, &out)                      // GroupContext.version mls10
        uint16(1, &out)                      // GroupContext.cipher_suite
        opaque(group, &out)                  // GroupContext.group_id
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: epoch >> UInt64(shift))) }
        opaque(made(32, fill), &out)          // GroupContext.tree_hash
        opaque(made(32, fill), &out)          // GroupContext.confirmed_transcript_hash
        opaque([], &out)                     // GroupContext.extensions
        opaque([], &out)                     // GroupInfo.extensions
        opaque(made(32, fill), &out)          // confirmation_tag
        out += [0, 0, 0, 0]                  // signer: leaf 0
        opaque(made(64, fill), &out)          // signature
        return out
    }

    /// An `MLSMessage` `mls_private_message` (an application message) in `group` on `epoch`, as
    /// a SEALED message's content carries one (docs/PROTOCOL.md, Sealed messages), with random
    /// `encrypted_sender_data` (a `SenderData`'s 12 bytes and a 16-byte tag) and
    /// `ciphertextBytes` random bytes of ciphertext. The server checks only its first four bytes
    /// and cannot decrypt it; no member could open it.
    public static func privateMessage(group: [UInt8] = MLSFraming.groupID(), epoch: UInt64 = 1, ciphertextBytes: Int = 80) -> [UInt8] {
        var out: [UInt8] = []
        uint16(1, &out)                      // version mls10
        uint16(2, &out)                      // wire_format mls_private_message
        opaque(group, &out)                  // group_id
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: epoch >> UInt64(shift))) }
        out.append(1)                        // content_type application
        opaque([], &out)                     // authenticated_data
        opaque(made(28, nil), &out)          // encrypted_sender_data
        opaque(made(ciphertextBytes, nil), &out) // ciphertext
        return out
    }

    /// An `MLSMessage` `mls_welcome` of cipher suite 1 with `secrets` made-up
    /// `EncryptedGroupSecrets` (one per device the commit adds: the server checks the count) and
    /// `infoBytes` random bytes of encrypted group info (every made-up byte `fill`, if set).
    public static func welcome(secrets count: Int = 1, infoBytes: Int = 64, fill: UInt8? = nil) -> [UInt8] {
        let random = { (count: Int) in made(count, fill) }
        var out: [UInt8] = []
        uint16(1, &out)                      // version mls10
        uint16(3, &out)                      // wire_format mls_welcome
        uint16(1, &out)                      // cipher_suite
        var secrets: [UInt8] = []
        for _ in 0..<count {
            opaque(random(32), &secrets)     // new_member: a KeyPackageRef
            opaque(random(32), &secrets)     // encrypted_group_secrets.kem_output
            opaque(random(48), &secrets)     // encrypted_group_secrets.ciphertext
        }
        opaque(secrets, &out)                // secrets<V>: `count` of them
        opaque(random(infoBytes), &out)      // encrypted_group_info
        return out
    }

    /// A commit's path leaf (`commit(path:)`): whose credential it holds, and who signs it.
    public struct PathLeaf: Sendable {
        public var identity: [UInt8]
        public var signer: Curve25519.Signing.PrivateKey
        /// The signature key the leaf names in place of the signer's own.
        public var claimedKey: [UInt8]?

        public init(identity: [UInt8], signer: Curve25519.Signing.PrivateKey, claimedKey: [UInt8]? = nil) {
            self.identity = identity
            self.signer = signer
            self.claimedKey = claimedKey
        }
    }

    /// The group id a public message is framed for (its `group_id`, the first field after the
    /// version and wire format); nil for bytes that are no `mls_public_message` with one.
    public static func groupID(ofCommit bytes: [UInt8]) -> [UInt8]? {
        guard bytes.count > 4, bytes[0..<4] == [0, 1, 0, 1] else { return nil }
        let first = bytes[4]
        let (length, start): (Int, Int) = switch first >> 6 {
        case 0: (Int(first), 5)
        case 1 where bytes.count > 5: (Int(first & 0x3f) << 8 | Int(bytes[5]), 6)
        default: (-1, 0)
        }
        guard length >= 0, bytes.count >= start + length else { return nil }
        return Array(bytes[start..<(start + length)])
    }

    /// A random MLS group id of 16 bytes, as SIMP's client makes one.
    public static func groupID() -> [UInt8] { made(16, nil) }

    private static func made(_ count: Int, _ fill: UInt8?) -> [UInt8] {
        fill.map { [UInt8](repeating: $0, count: count) } ?? (0..<count).map { _ in UInt8.random(in: 0...255) }
    }

    private static func uint16(_ value: UInt16, _ out: inout [UInt8]) {
        out.append(UInt8(value >> 8))
        out.append(UInt8(value & 0xff))
    }

    /// `opaque<V>`: the length as the variable-length integer of section 2.1.2 (1 byte below
    /// 64, 2 below 16,384, else 4), then the bytes.
    private static func opaque(_ bytes: [UInt8], _ out: inout [UInt8]) {
        let count = UInt32(bytes.count)
        if count < 64 {
            out.append(UInt8(count))
        } else if count < 16_384 {
            out += [0x40 | UInt8(count >> 8), UInt8(count & 0xff)]
        } else {
            out += [0x80 | UInt8(count >> 24), UInt8((count >> 16) & 0xff), UInt8((count >> 8) & 0xff), UInt8(count & 0xff)]
        }
        out += bytes
    }
}
