import Crypto
import Foundation
import SIMPClient
import SIMPCore
import SIMPMLS

/// A user's keys as a client would hold them, for the key directory's tests: an identity, and
/// per device an MLS signature key certified by it and KeyPackages made with SIMPMLS.
struct KeyFixtures {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let capabilities = Capabilities(versions: [1], cipherSuites: [CipherSuiteID(1), CipherSuiteID(3)], extensions: [],
                                           proposals: [], credentials: [.basic])
    /// Seconds since the epoch of every test's "now" in the pure tests.
    static let now: UInt64 = 1_800_000_000

    static func random(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255) } }

    let user: String
    let identity = Curve25519.Signing.PrivateKey()
    var identityKey: [UInt8] { Array(identity.publicKey.rawRepresentation) }

    init(_ user: String) { self.user = user }

    static func deviceSigner() throws -> SignaturePrivateKey { try SignaturePrivateKey(rawRepresentation: random(32)) }

    func certificate(_ device: String, _ signer: SignaturePrivateKey) throws -> Simp_DeviceCertificate {
        try DeviceCertificate.sign(user: user, device: device, deviceKey: signer.publicKey.rawRepresentation, identity: identity)
    }

    /// `certificate` as the client library publishes it.
    func certified(_ device: String, _ signer: SignaturePrivateKey) throws -> CertifiedDevice {
        try CertifiedDevice.sign(user: user, device: device, deviceKey: signer.publicKey.rawRepresentation, identity: identity)
    }

    /// A KeyPackage of `device` as uploaded: an MLSMessage (RFC 9420 section 6).
    func keyPackage(_ device: String, _ signer: SignaturePrivateKey, credential: String? = nil,
                    lifetime: Lifetime = Lifetime(notBefore: 0, notAfter: UInt64.max)) throws -> [UInt8] {
        let identity = credential.map { Array($0.utf8) } ?? KeyDirectoryRules.credentialIdentity(user: user, device: device)
        let bundle = try MLSKeyPackageBundle(suite: Self.suite, credential: .basic(identity: identity), capabilities: Self.capabilities,
                                             lifetime: lifetime, signer: signer, randomness: Self.random)
        return try MLSMessage.keyPackage(bundle.keyPackage.wire).mlsEncoded()
    }
}
