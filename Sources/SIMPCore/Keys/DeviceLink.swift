import Crypto
import Foundation

/// Linking a device (docs/E2EE.md, "Linking a device"): a new device of a user gets the user's
/// identity key from a device that holds it, once the user has compared a short code on both.
/// The server relays four bodies between the two (LinkStep); it reads them all, so nothing in
/// them may let it make the codes agree or learn the key:
///
/// 1. request (new device): its device key, an X25519 key the grant is sealed to, and a
///    commitment to a nonce it keeps secret for now;
/// 2. offer (existing device): the identity key and a nonce of its own;
/// 3. reveal (new device): its nonce, which must match the commitment;
/// 4. grant (existing device, after the user typed the code shown on the new device): the
///    identity's private key, sealed by HPKE (RFC 9180, base mode) to the request's X25519 key.
///
/// The code is a hash of both nonces and every body. Whoever stands between the devices must
/// commit to its nonce before it sees the other side's, so it matches the two codes with
/// probability 10^-6 per try (the numeric comparison of Bluetooth's Secure Simple Pairing,
/// and ZRTP's hash commitment), and a failed try shows the user two different codes.
/// Every body is fixed-size and begins with the version byte.
public enum DeviceLink {
    public static let version: UInt8 = 1
    static let commitmentLabel = Array("SIMP link commitment 1".utf8)
    static let codeLabel = Array("SIMP link code 1".utf8)
    static let grantLabel = Array("SIMP link grant 1".utf8)
    /// Digits in the code: 10^6 codes, as Bluetooth's numeric comparison.
    public static let codeDigits = 6
    public static let hpkeSuite = HPKE.Ciphersuite.Curve25519_SHA256_ChachaPoly

    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        /// A body that is not a body of this version and size.
        case malformed(String)
        /// The reveal's nonce does not open the request's commitment.
        case commitmentMismatch
        /// The code the user typed is not the code of this link.
        case codeMismatch
        /// The grant does not open, or holds a key that is not the offered identity's.
        case badGrant

        public var description: String {
            switch self {
            case .malformed(let what): "not a link \(what) of version \(DeviceLink.version)"
            case .commitmentMismatch: "the new device's reveal does not match its request: someone else answered"
            case .codeMismatch: "the code is not this link's code: the devices do not see each other (not linked)"
            case .badGrant: "the grant does not hold the offered identity key"
            }
        }
    }

    /// The request's body: version || device_key[32] || hpke_key[32] || commitment[32].
    public struct Request: Sendable, Equatable {
        public let deviceKey: [UInt8]
        public let hpkeKey: [UInt8]
        public let commitment: [UInt8]

        public var bytes: [UInt8] { [DeviceLink.version] + deviceKey + hpkeKey + commitment }

        public init(bytes: [UInt8]) throws(Problem) {
            guard bytes.count == 97, bytes[0] == DeviceLink.version else { throw .malformed("request") }
            deviceKey = Array(bytes[1..<33])
            hpkeKey = Array(bytes[33..<65])
            commitment = Array(bytes[65..<97])
        }

        init(deviceKey: [UInt8], hpkeKey: [UInt8], commitment: [UInt8]) {
            (self.deviceKey, self.hpkeKey, self.commitment) = (deviceKey, hpkeKey, commitment)
        }
    }

    /// The offer's body: version || identity_key[32] || nonce[32].
    public struct Offer: Sendable, Equatable {
        public let identityKey: [UInt8]
        public let nonce: [UInt8]

        public var bytes: [UInt8] { [DeviceLink.version] + identityKey + nonce }

        public init(bytes: [UInt8]) throws(Problem) {
            guard bytes.count == 65, bytes[0] == DeviceLink.version else { throw .malformed("offer") }
            identityKey = Array(bytes[1..<33])
            nonce = Array(bytes[33..<65])
        }

        public init(identityKey: [UInt8], nonce: [UInt8]) {
            (self.identityKey, self.nonce) = (identityKey, nonce)
        }
    }

    /// The reveal's body: version || nonce[32].
    public struct Reveal: Sendable, Equatable {
        public let nonce: [UInt8]

        public var bytes: [UInt8] { [DeviceLink.version] + nonce }

        public init(bytes: [UInt8]) throws(Problem) {
            guard bytes.count == 33, bytes[0] == DeviceLink.version else { throw .malformed("reveal") }
            nonce = Array(bytes[1..<33])
        }

        init(nonce: [UInt8]) { self.nonce = nonce }
    }

    /// The grant's body: version || enc[32] || ciphertext[48] (the identity key's 32-byte seed
    /// and ChaCha20-Poly1305's tag).
    public struct Grant: Sendable, Equatable {
        public let encapsulatedKey: [UInt8]
        public let ciphertext: [UInt8]

        public var bytes: [UInt8] { [DeviceLink.version] + encapsulatedKey + ciphertext }

        public init(bytes: [UInt8]) throws(Problem) {
            guard bytes.count == 81, bytes[0] == DeviceLink.version else { throw .malformed("grant") }
            encapsulatedKey = Array(bytes[1..<33])
            ciphertext = Array(bytes[33..<81])
        }

        init(encapsulatedKey: [UInt8], ciphertext: [UInt8]) {
            (self.encapsulatedKey, self.ciphertext) = (encapsulatedKey, ciphertext)
        }
    }

    /// SHA-256(label<V> || device_key<V> || hpke_key<V> || nonce<V>), RFC 9420's vectors.
    static func commitment(deviceKey: [UInt8], hpkeKey: [UInt8], nonce: [UInt8]) -> [UInt8] {
        hash([commitmentLabel, deviceKey, hpkeKey, nonce])
    }

    /// The transcript both sides hash: user<V> || device<V> || request<V> || offer<V> || reveal<V>.
    static func transcript(user: String, device: String, _ request: Request, _ offer: Offer, _ reveal: Reveal) -> [[UInt8]] {
        [Array(user.utf8), Array(device.utf8), request.bytes, offer.bytes, reveal.bytes]
    }

    /// The code: SHA-256(label<V> || transcript)'s first 8 bytes, big-endian, modulo 10^6, as 6
    /// digits (a bias of 2^-44: none that matters).
    public static func code(user: String, device: String, request: Request, offer: Offer, reveal: Reveal) -> String {
        let digest = hash([codeLabel] + transcript(user: user, device: device, request, offer, reveal))
        let value = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let digits = String(value % 1_000_000)
        return String(repeating: "0", count: codeDigits - digits.count) + digits
    }

    /// HPKE's info for the grant: label<V> || SHA-256(transcript), so a grant opens only for this link.
    static func grantInfo(user: String, device: String, request: Request, offer: Offer, reveal: Reveal) -> Data {
        var info: [UInt8] = []
        for field in [grantLabel, hash(transcript(user: user, device: device, request, offer, reveal))] {
            DeviceCertificateTBS.appendVarint(field.count, to: &info)
            info += field
        }
        return Data(info)
    }

    static func hash(_ fields: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        for field in fields {
            DeviceCertificateTBS.appendVarint(field.count, to: &bytes)
            bytes += field
        }
        return Array(SHA256.hash(data: bytes))
    }

    static func randomNonce() -> [UInt8] {
        Array(SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) })
    }
}

/// The new device's side of a link: its keys and its nonce, kept in memory until the grant.
public struct LinkingDevice: Sendable {
    public let user: String
    public let device: String
    /// The device key (Ed25519) the identity will certify.
    public let deviceKey: Curve25519.Signing.PrivateKey
    let hpkeKey: Curve25519.KeyAgreement.PrivateKey
    let nonce: [UInt8]
    public let request: DeviceLink.Request

    public init(user: String, device: String) {
        self.init(user: user, device: device, deviceKey: .init(), hpkeKey: .init(), nonce: DeviceLink.randomNonce())
    }

    /// With chosen keys and nonce: the known-answer tests (docs/vectors/device-link.json).
    public init(user: String, device: String, deviceKey: Curve25519.Signing.PrivateKey, hpkeKey: Curve25519.KeyAgreement.PrivateKey,
                nonce: [UInt8]) {
        (self.user, self.device, self.deviceKey, self.hpkeKey, self.nonce) = (user, device, deviceKey, hpkeKey, nonce)
        let devicePublic = Array(deviceKey.publicKey.rawRepresentation), hpkePublic = Array(hpkeKey.publicKey.rawRepresentation)
        request = DeviceLink.Request(deviceKey: devicePublic, hpkeKey: hpkePublic,
                                     commitment: DeviceLink.commitment(deviceKey: devicePublic, hpkeKey: hpkePublic, nonce: nonce))
    }

    public var reveal: DeviceLink.Reveal { DeviceLink.Reveal(nonce: nonce) }

    /// The code to show once an offer arrived (the reveal is sent with it).
    public func code(for offer: DeviceLink.Offer) -> String {
        DeviceLink.code(user: user, device: device, request: request, offer: offer, reveal: reveal)
    }

    /// The identity's private key from the grant: it must open under this link's transcript
    /// and be the private key of the offered identity key (the one the code covered).
    public func open(_ grant: DeviceLink.Grant, offer: DeviceLink.Offer) throws(DeviceLink.Problem) -> Curve25519.Signing.PrivateKey {
        let info = DeviceLink.grantInfo(user: user, device: device, request: request, offer: offer, reveal: reveal)
        do {
            var recipient = try HPKE.Recipient(privateKey: hpkeKey, ciphersuite: DeviceLink.hpkeSuite, info: info,
                                               encapsulatedKey: Data(grant.encapsulatedKey))
            let seed = try recipient.open(Data(grant.ciphertext), authenticating: Data())
            let identity = try Curve25519.Signing.PrivateKey(rawRepresentation: seed)
            guard Array(identity.publicKey.rawRepresentation) == offer.identityKey else { throw DeviceLink.Problem.badGrant }
            return identity
        } catch {
            throw .badGrant
        }
    }
}

/// The existing device's side, after its offer: the request it answered and the offer it
/// sent, both as it sent them (not as the server shows them later).
public struct OfferedLink: Sendable, Equatable {
    public let user: String
    public let device: String
    public let request: DeviceLink.Request
    public let offer: DeviceLink.Offer

    public init(user: String, device: String, request: DeviceLink.Request, identityKey: [UInt8]) {
        self.init(user: user, device: device, request: request, offer: DeviceLink.Offer(identityKey: identityKey, nonce: DeviceLink.randomNonce()))
    }

    public init(user: String, device: String, request: DeviceLink.Request, offer: DeviceLink.Offer) {
        (self.user, self.device, self.request, self.offer) = (user, device, request, offer)
    }

    /// The link once the reveal opened the request's commitment: only then is there a code.
    public func revealed(by reveal: DeviceLink.Reveal) throws(DeviceLink.Problem) -> RevealedLink {
        let expected = DeviceLink.commitment(deviceKey: request.deviceKey, hpkeKey: request.hpkeKey, nonce: reveal.nonce)
        guard expected == request.commitment else { throw .commitmentMismatch }
        return RevealedLink(link: self, reveal: reveal)
    }
}

/// A link whose reveal matched its commitment: its code can be shown and compared.
public struct RevealedLink: Sendable, Equatable {
    public let link: OfferedLink
    public let reveal: DeviceLink.Reveal

    public var code: String {
        DeviceLink.code(user: link.user, device: link.device, request: link.request, offer: link.offer, reveal: reveal)
    }

    /// The grant, only if `typed` (what the user read on the new device) is this link's code.
    public func grant(identity: Curve25519.Signing.PrivateKey, typed: String) throws(DeviceLink.Problem) -> DeviceLink.Grant {
        let digits = typed.filter { !$0.isWhitespace }
        guard digits.count == DeviceLink.codeDigits, Array(digits.utf8).elementsEqual(Array(code.utf8)) else { throw .codeMismatch }
        guard Array(identity.publicKey.rawRepresentation) == link.offer.identityKey else { throw .badGrant }
        let info = DeviceLink.grantInfo(user: link.user, device: link.device, request: link.request, offer: link.offer, reveal: reveal)
        do {
            let recipient = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: link.request.hpkeKey)
            var sender = try HPKE.Sender(recipientKey: recipient, ciphersuite: DeviceLink.hpkeSuite, info: info)
            let sealed = try sender.seal(identity.rawRepresentation, authenticating: Data())
            return DeviceLink.Grant(encapsulatedKey: Array(sender.encapsulatedKey), ciphertext: Array(sealed))
        } catch {
            throw .malformed("request key (not an X25519 key)")
        }
    }
}
