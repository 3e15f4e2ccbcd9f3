import Crypto
import SIMPCore
import SIMPMLS
import Testing
@testable import SIMPClient

/// `DirectoryValidator` (RFC 9420 section 5.3.1 for SIMP): a leaf passes only as the device its
/// user certified, under that device's key; a leaf of a user outside the conversation is read
/// from the directory (`NotKnown`) only in a group, whose former members' leaves a Welcome's tree
/// or a past commit may hold, and at most for `maxFormerMembers` users.
struct DirectoryValidatorTests {
    static func key() throws -> (bytes: [UInt8], key: SignaturePublicKey) {
        let bytes = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        return (bytes, try SignaturePublicKeyIn(bytes: bytes).validate(for: ConversationKeys.suite))
    }

    static func credential(_ user: String, _ device: String) -> Credential {
        .basic(identity: KeyDirectoryRules.credentialIdentity(user: user, device: device))
    }

    @Test func aCertifiedDevicePassesOnlyUnderItsCertifiedKey() throws {
        let (phone, other) = (try Self.key(), try Self.key())
        let validator = DirectoryValidator(keys: [KeyDirectoryRules.credentialIdentity(user: "bob", device: "phone"): phone.bytes],
                                           owners: ["alice", "bob"])
        try validator.validate(Self.credential("bob", "phone"), signatureKey: phone.key)
        // The same name under another key: a revoked device, or one of a replaced identity.
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "phone"), signatureKey: other.key) }
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "laptop"), signatureKey: phone.key) }
    }

    /// A certificate the directory lists as revoked (the device revoked, or replaced under its
    /// name by another key) lets that leaf pass, for commits made while it was certified; it
    /// stays out of `keys`, which a member check and a claim read alone.
    @Test func aRevokedDevicesLeafPassesButIsNoMember() throws {
        let identity = Curve25519.Signing.PrivateKey()
        let identityKey = try #require(IdentityKey(Array(identity.publicKey.rawRepresentation)))
        func revoked(_ device: String, _ key: [UInt8]) throws -> VerifiedDevice {
            let wire = try DeviceCertificate.sign(user: "bob", device: device, deviceKey: key, identity: identity)
            let unverified = UnverifiedDeviceCertificate(user: "bob", device: device, deviceKey: key, signature: Array(wire.signature))
            return VerifiedDevice(try unverified.verified(by: identityKey))
        }
        let (phone, old, other) = (try Self.key(), try Self.key(), try Self.key())
        let certified = [KeyDirectoryRules.credentialIdentity(user: "bob", device: "phone"): phone.bytes]
        var validator = DirectoryValidator(keys: certified, owners: ["alice", "bob"])
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "phone"), signatureKey: old.key) }
        validator.admitRevoked([try revoked("phone", old.bytes), try revoked("laptop", old.bytes)])
        try validator.validate(Self.credential("bob", "phone"), signatureKey: old.key)
        try validator.validate(Self.credential("bob", "phone"), signatureKey: phone.key)
        try validator.validate(Self.credential("bob", "laptop"), signatureKey: old.key)
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "laptop"), signatureKey: other.key) }
        #expect(validator.keys == certified)
    }

    /// A device this device saw certified (`admitSeen`) passes the check under the key it was
    /// seen with, and no other; it stays out of `keys`.
    @Test func aSeenDevicesLeafPassesUnderItsKeyButIsNoMember() throws {
        let (seen, other) = (try Self.key(), try Self.key())
        var validator = DirectoryValidator(keys: [:], owners: ["alice", "bob"])
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "phone"), signatureKey: seen.key) }
        validator.admitSeen([ClientStore.SeenDevice(identity: KeyDirectoryRules.credentialIdentity(user: "bob", device: "phone"), key: seen.bytes,
                                                   identityKey: [1])])
        try validator.validate(Self.credential("bob", "phone"), signatureKey: seen.key)
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "phone"), signatureKey: other.key) }
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("bob", "laptop"), signatureKey: seen.key) }
        #expect(validator.keys.isEmpty)
    }

    @Test func aStrangersLeafIsRefusedInAOneToOneConversationAndReadInAGroup() throws {
        let eve = try Self.key()
        var validator = DirectoryValidator(keys: [:], owners: ["alice", "bob"])
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("eve", "phone"), signatureKey: eve.key) }

        validator.admitsFormerMembers = true
        #expect(throws: DirectoryValidator.NotKnown.self) { try validator.validate(Self.credential("eve", "phone"), signatureKey: eve.key) }
        let read = validator.including("eve", devices: [])
        // Read once: eve's leaf is judged by what her directory said (no such device here).
        #expect(throws: DirectoryValidator.Uncertified.self) { try read.validate(Self.credential("eve", "phone"), signatureKey: eve.key) }
    }

    @Test func noMoreThanMaxFormerMembersAreRead() throws {
        let key = try Self.key()
        var validator = DirectoryValidator(keys: [:], owners: ["alice"])
        validator.admitsFormerMembers = true
        for index in 0..<DirectoryValidator.maxFormerMembers {
            #expect(throws: DirectoryValidator.NotKnown.self) { try validator.validate(Self.credential("u\(index)", "d"), signatureKey: key.key) }
            validator = validator.including("u\(index)", devices: [])
        }
        #expect(throws: DirectoryValidator.Uncertified.self) { try validator.validate(Self.credential("one-more", "d"), signatureKey: key.key) }
    }
}
