import SIMPMLS
import Testing

/// Issue 42 item 4: the bytes an application message gains as an MLS PrivateMessage, at most 160
/// for a 100-byte message. A size, so exact and the same on every machine.
///
/// The message is Alice's (leaf 0) in a 2-member group at epoch 1 whose keys come from the key
/// schedule (as in Benchmarks/Benchmarks/SIMPMLSBenchmarks): a 16-byte (random 128-bit) group ID,
/// no authenticated data. SIMP has no padding policy yet, so no padding; every padding byte
/// adds one byte. The overhead, with G the group ID's length and P the padding:
///
///     MLSMessage version + wire_format                      4
///     group_id<V>                                           1 + G
///     epoch, content_type, authenticated_data<V> (empty)    8 + 1 + 1
///     encrypted_sender_data<V>: 12 + AEAD tag 16            1 + 28
///     ciphertext<V> (2-byte length from 64 bytes up):       2 +
///       application_data<V> length (64..16383 bytes)          2
///       signature<V> (Ed25519; 2-byte length, 64 >= 64)       2 + 64
///       padding                                               P
///       AEAD tag                                              16
///     total                                                 130 + G + P = 146 + P
///
/// (Both suites' AEADs have 16-byte tags, so the figure is the same for suites 1 and 3.)
@Suite struct MessageOverheadTests {
    static let groupID = [UInt8](repeating: 0xA5, count: 16)

    /// The encoded MLSMessage of `payload` sent by Alice, padded with `padding` zero bytes.
    static func wireSize(suite: MLSCipherSuite, payload: Int, padding: Int) throws -> Int {
        let context0 = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 0, treeHash: [UInt8](repeating: 1, count: 32),
            confirmedTranscriptHash: [], extensions: [])
        let epoch0 = try EpochSecrets(
            suite: suite, initSecret: SecretBytes([UInt8](repeating: 2, count: 32)), commitSecret: nil, pskSecret: nil,
            groupContext: context0)
        let context = GroupContext(
            cipherSuite: suite.id, groupID: groupID, epoch: 1, treeHash: [UInt8](repeating: 3, count: 32),
            confirmedTranscriptHash: [UInt8](repeating: 4, count: 32), extensions: [])
        let secrets = try EpochSecrets(suite: suite, initSecret: epoch0.initSecret, commitSecret: nil, pskSecret: nil, groupContext: context)
        var alice = try MessageProtection(epochSecrets: secrets, groupContext: context, treeSize: try #require(TreeSize(leafCount: 2)))
        let signer = try SignaturePrivateKey(rawRepresentation: [UInt8](repeating: 5, count: 32))
        let framed = FramedContent(
            groupID: groupID, epoch: 1, sender: .member(leafIndex: 0), authenticatedData: [],
            content: .application([UInt8](repeating: 0x78, count: payload)))
        let signed = try AuthenticatedContent(
            signing: framed, wireFormat: .privateMessage, context: context, signer: signer, suite: suite, confirmationTag: nil)
        let message = try alice.protect(signed, paddingLength: padding, reuseGuard: [6, 7, 8, 9])
        return try MLSMessage.privateMessage(message).mlsEncoded().count
    }

    @Test(arguments: MLSCipherSuite.allCases)
    func aHundredByteMessageGains146BytesUnpadded(suite: MLSCipherSuite) throws {
        let overhead = try Self.wireSize(suite: suite, payload: 100, padding: 0) - 100
        #expect(overhead == 146)
        #expect(overhead <= 160)
    }

    @Test(arguments: MLSCipherSuite.allCases)
    func theOverheadIsTheSameFor1KiBAndGrowsOneForOneWithPadding(suite: MLSCipherSuite) throws {
        let kibibyte = try Self.wireSize(suite: suite, payload: 1024, padding: 0) - 1024
        #expect(kibibyte == 146)
        // Padding the PrivateMessageContent (2 + 100 + 66 = 168 bytes) to a multiple of 16 takes
        // 8 bytes here; 14 bytes of padding is the most that stays within 160.
        let padded = try Self.wireSize(suite: suite, payload: 100, padding: 8) - 100
        #expect(padded == 154)
        let mostPadded = try Self.wireSize(suite: suite, payload: 100, padding: 14) - 100
        #expect(mostPadded == 160)
    }
}
