import Crypto
import Foundation

/// `struct { opaque kem_output<V>; opaque ciphertext<V>; } HPKECiphertext;` (RFC 9420 section 5.1.3).
public struct HPKECiphertext: Sendable, Equatable, MLSCodable {
    public let kemOutput: [UInt8]
    public let ciphertext: [UInt8]

    public init(kemOutput: [UInt8], ciphertext: [UInt8]) {
        self.kemOutput = kemOutput
        self.ciphertext = ciphertext
    }

    public init(from reader: inout TLSReader) throws {
        kemOutput = try reader.readOpaque()
        ciphertext = try reader.readOpaque()
    }

    public func encode(to writer: inout TLSWriter) throws {
        try writer.writeOpaque(kemOutput)
        try writer.writeOpaque(ciphertext)
    }
}

/// RFC 9420 section 5.1.3: `EncryptWithLabel` / `DecryptWithLabel`, HPKE (RFC 9180) in base
/// mode, single-shot, with `info` the encoded `EncryptContext` and empty `aad`.
///
/// Decryption is swift-crypto's `HPKE.Recipient`. Encryption is written here (RFC 9180 sections
/// 4.1, 5.1, 5.2, 7.1.3) because swift-crypto's `HPKE.Sender` draws its ephemeral key itself,
/// and SIMPMLS takes its randomness from the caller; each of our ciphertexts is opened by
/// swift-crypto's recipient in the vector checks and tests.
extension MLSCipherSuite {
    /// Bytes of randomness `encryptWithLabel` takes: the KEM's `Nsk` (RFC 9180 section 7.1).
    public static let encapsulationRandomnessLength = 32

    /// `EncryptContext`: `struct { opaque label<V> = "MLS 1.0 " + Label; opaque context<V>; }`.
    static func encryptContext(label: [UInt8], context: [UInt8]) throws -> [UInt8] {
        var w = TLSWriter()
        try w.writeOpaque(labelPrefix + label)
        try w.writeOpaque(context)
        return w.bytes
    }

    /// `EncryptWithLabel(PublicKey, Label, Context, Plaintext) = SealBase(PublicKey, EncryptContext, "", Plaintext)`.
    /// `randomness` (32 bytes, from a CSPRNG) seeds the ephemeral key through `DeriveKeyPair`.
    public func encryptWithLabel(
        _ key: HPKEPublicKey, label: [UInt8], context: [UInt8], plaintext: [UInt8], randomness: [UInt8]
    ) throws -> HPKECiphertext {
        let info = try Self.encryptContext(label: label, context: context)
        return try HPKEBase(suite: self).seal(to: key, info: info, aad: [], plaintext: plaintext, randomness: randomness)
    }

    /// `DecryptWithLabel(PrivateKey, Label, Context, KEMOutput, Ciphertext) = OpenBase(KEMOutput, PrivateKey, EncryptContext, "", Ciphertext)`.
    public func decryptWithLabel(
        _ key: HPKEPrivateKey, label: [UInt8], context: [UInt8], ciphertext: HPKECiphertext
    ) throws -> [UInt8] {
        let info = try Self.encryptContext(label: label, context: context)
        // RFC 9180 section 7.1.4: the recipient, too, must refuse an all-zero X25519 output, which
        // swift-crypto does not check; a kem_output that is not an X25519 key is refused here too.
        let ephemeral: HPKEPublicKey
        do {
            ephemeral = try HPKEPublicKeyIn(bytes: ciphertext.kemOutput).validate(for: self)
            _ = try HPKEBase.x25519(key, ephemeral)
        } catch {
            throw MLSCryptoError.decryptionFailed
        }
        do {
            var recipient = try HPKE.Recipient(
                privateKey: key.key, ciphersuite: hpke, info: Data(info), encapsulatedKey: Data(ciphertext.kemOutput))
            return Array(try recipient.open(ciphertext.ciphertext, authenticating: Data()))
        } catch {
            throw MLSCryptoError.decryptionFailed
        }
    }

    /// The label of the external init secret's export (RFC 9420 section 8.3).
    static let externalInitLabel = Array("MLS 1.0 external init secret".utf8)

    /// RFC 9420 section 8.3, a new member's side of an external commit:
    /// `kem_output, context = SetupBaseS(external_pub, "")` and
    /// `init_secret = context.export("MLS 1.0 external init secret", KDF.Nh)`. `randomness` (32
    /// fresh bytes) seeds the ephemeral key.
    public func externalInit(externalPub: HPKEPublicKey, randomness: [UInt8]) throws -> (kemOutput: [UInt8], initSecret: SecretBytes) {
        let hpke = HPKEBase(suite: self)
        let setup = try hpke.setupBaseS(to: externalPub, info: [], randomness: randomness)
        let secret = try hpke.export(
            secret: setup.secret, keyScheduleContext: setup.context, exporterContext: Self.externalInitLabel, length: hashLength)
        return (setup.enc, SecretBytes(secret))
    }

    /// RFC 9420 section 8.3, a member's side: `context = SetupBaseR(kem_output, external_priv, "")`
    /// and `init_secret = context.export("MLS 1.0 external init secret", KDF.Nh)`, through
    /// swift-crypto's recipient. A `kem_output` that is not a key of the suite, or a low-order one,
    /// is refused.
    public func externalInitSecret(kemOutput: [UInt8], externalPriv: HPKEPrivateKey) throws -> SecretBytes {
        do {
            _ = try HPKEBase.x25519(externalPriv, try HPKEPublicKeyIn(bytes: kemOutput).validate(for: self))
            let recipient = try HPKE.Recipient(
                privateKey: externalPriv.key, ciphersuite: hpke, info: Data(), encapsulatedKey: Data(kemOutput))
            let key = try recipient.exportSecret(context: Self.externalInitLabel, outputByteCount: hashLength)
            return SecretBytes(key.withUnsafeBytes { Array($0) })
        } catch {
            throw MLSCryptoError.decryptionFailed
        }
    }

    /// RFC 9180 section 7.1.3 `DeriveKeyPair(ikm)` for DHKEM(X25519, HKDF-SHA256), which RFC 9420
    /// section 5.1.1 uses to turn node secrets into HPKE key pairs.
    public func deriveHPKEKeyPair(ikm: [UInt8]) throws -> HPKEPrivateKey {
        try HPKEBase(suite: self).deriveKeyPair(ikm: ikm)
    }
}

/// HPKE base-mode sender for DHKEM(X25519, HKDF-SHA256) with HKDF-SHA256 (RFC 9180).
struct HPKEBase {
    let suite: MLSCipherSuite

    static let version = Array("HPKE-v1".utf8)
    static let kemID: UInt16 = 0x0020
    static let kdfID: UInt16 = 0x0001

    var kemSuiteID: [UInt8] { Array("KEM".utf8) + be16(Self.kemID) }
    var hpkeSuiteID: [UInt8] {
        Array("HPKE".utf8) + be16(Self.kemID) + be16(Self.kdfID) + be16(suite.hpkeAEADID)
    }

    func be16(_ v: UInt16) -> [UInt8] { [UInt8(v >> 8), UInt8(v & 0xFF)] }

    /// RFC 9180 section 4: `LabeledExtract(salt, label, ikm)`.
    func labeledExtract(_ suiteID: [UInt8], salt: [UInt8], label: String, ikm: [UInt8]) -> [UInt8] {
        suite.extract(salt: salt, ikm: Self.version + suiteID + Array(label.utf8) + ikm)
    }

    /// RFC 9180 section 4: `LabeledExpand(prk, label, info, L)`.
    func labeledExpand(_ suiteID: [UInt8], prk: [UInt8], label: String, info: [UInt8], length: Int) throws -> [UInt8] {
        guard length >= 0, length <= Int(UInt16.max) else { throw MLSCryptoError.outputLengthTooLarge(length) }
        let labeledInfo = be16(UInt16(length)) + Self.version + suiteID + Array(label.utf8) + info
        return try suite.expand(secret: prk, info: labeledInfo, length: length)
    }

    /// `DH(sk, pk)` for X25519, refusing the all-zero output of a low-order public key (RFC 9180
    /// section 7.1.4: "MUST check whether the Diffie-Hellman shared secret is the all-zero value
    /// and abort if so"). swift-crypto does not check it (nor does CryptoKit), so this does, without
    /// an early exit.
    static func x25519(_ sk: HPKEPrivateKey, _ pk: HPKEPublicKey) throws -> [UInt8] {
        let dh: [UInt8]
        do {
            dh = try sk.key.sharedSecretFromKeyAgreement(with: pk.key).withUnsafeBytes { Array($0) }
        } catch {
            throw MLSCryptoError.invalidKey("X25519 key agreement failed")
        }
        var any: UInt8 = 0
        for b in dh { any |= b }
        guard any != 0 else { throw MLSCryptoError.invalidKey("X25519 shared secret is all zero (low-order public key)") }
        return dh
    }

    /// RFC 9180 section 7.1.3: for X25519, `sk = LabeledExpand(dkp_prk, "sk", "", Nsk)`.
    func deriveKeyPair(ikm: [UInt8]) throws -> HPKEPrivateKey {
        let prk = labeledExtract(kemSuiteID, salt: [], label: "dkp_prk", ikm: ikm)
        let sk = try labeledExpand(kemSuiteID, prk: prk, label: "sk", info: [], length: 32)
        return try HPKEPrivateKey(rawRepresentation: sk)
    }

    /// RFC 9180 sections 4.1 (`Encap`) and 5.1 (`KeySchedule`, mode_base, no PSK): the
    /// encapsulated key, the key schedule's `secret` and its `key_schedule_context`.
    func setupBaseS(to recipient: HPKEPublicKey, info: [UInt8], randomness: [UInt8]) throws -> (enc: [UInt8], secret: [UInt8], context: [UInt8]) {
        guard randomness.count == MLSCipherSuite.encapsulationRandomnessLength else {
            throw MLSCryptoError.invalidRandomness(expected: MLSCipherSuite.encapsulationRandomnessLength, got: randomness.count)
        }
        let ephemeral = try deriveKeyPair(ikm: randomness)
        let dh = try Self.x25519(ephemeral, recipient)
        let enc = ephemeral.publicKey.rawRepresentation
        let kemContext = enc + recipient.rawRepresentation
        let eaePRK = labeledExtract(kemSuiteID, salt: [], label: "eae_prk", ikm: dh)
        let sharedSecret = try labeledExpand(kemSuiteID, prk: eaePRK, label: "shared_secret", info: kemContext, length: 32)
        let s = hpkeSuiteID
        let pskIDHash = labeledExtract(s, salt: [], label: "psk_id_hash", ikm: [])
        let infoHash = labeledExtract(s, salt: [], label: "info_hash", ikm: info)
        let secret = labeledExtract(s, salt: sharedSecret, label: "secret", ikm: [])
        return (Array(enc), secret, [0x00] + pskIDHash + infoHash)
    }

    /// RFC 9180 sections 5.1 and 5.3: `Export(exporter_context, L)` of a sender context,
    /// `LabeledExpand(LabeledExpand(secret, "exp", key_schedule_context, Nh), "sec", exporter_context, L)`.
    func export(secret: [UInt8], keyScheduleContext: [UInt8], exporterContext: [UInt8], length: Int) throws -> [UInt8] {
        let s = hpkeSuiteID
        let exporterSecret = try labeledExpand(s, prk: secret, label: "exp", info: keyScheduleContext, length: suite.hashLength)
        return try labeledExpand(s, prk: exporterSecret, label: "sec", info: exporterContext, length: length)
    }

    /// RFC 9180 sections 4.1 (`Encap`), 5.1 (`KeySchedule`, mode_base), 5.2 (`Seal`, sequence 0).
    func seal(to recipient: HPKEPublicKey, info: [UInt8], aad: [UInt8], plaintext: [UInt8], randomness: [UInt8]) throws -> HPKECiphertext {
        let (enc, secret, keyScheduleContext) = try setupBaseS(to: recipient, info: info, randomness: randomness)
        let s = hpkeSuiteID
        let key = try labeledExpand(s, prk: secret, label: "key", info: keyScheduleContext, length: suite.aeadKeyLength)
        let baseNonce = try labeledExpand(s, prk: secret, label: "base_nonce", info: keyScheduleContext, length: suite.aeadNonceLength)

        // Seal with sequence number 0: the nonce is base_nonce itself.
        let ciphertext: [UInt8]
        switch suite {
        case .x25519AES128GCMSHA256Ed25519:
            let box = try AES.GCM.seal(plaintext, using: SymmetricKey(data: key), nonce: try AES.GCM.Nonce(data: baseNonce), authenticating: aad)
            ciphertext = Array(box.ciphertext) + Array(box.tag)
        case .x25519ChaCha20Poly1305SHA256Ed25519:
            let box = try ChaChaPoly.seal(plaintext, using: SymmetricKey(data: key), nonce: try ChaChaPoly.Nonce(data: baseNonce), authenticating: aad)
            ciphertext = Array(box.ciphertext) + Array(box.tag)
        }
        return HPKECiphertext(kemOutput: enc, ciphertext: ciphertext)
    }
}
