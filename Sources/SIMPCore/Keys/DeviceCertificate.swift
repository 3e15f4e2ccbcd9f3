import Crypto
import Foundation

/// A user's identity key: Ed25519, 32 bytes (docs/E2EE.md, Part 2). It certifies the user's
/// devices; it never signs anything else.
public struct IdentityKey: Sendable, Equatable {
    public let rawRepresentation: [UInt8]
    let key: Curve25519.Signing.PublicKey

    /// Nil unless `bytes` is an Ed25519 public key (32 bytes that decode).
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 32, let key = try? Curve25519.Signing.PublicKey(rawRepresentation: bytes) else { return nil }
        self.key = key
        rawRepresentation = bytes
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawRepresentation == b.rawRepresentation }
}

/// What an identity signs to certify one device's key (docs/E2EE.md, "Device certificates";
/// docs/vectors/device-certificate.json): in the presentation language of RFC 9420 section 2.1,
/// with its variable-size vectors (section 2.1.2),
///
///     struct {
///         opaque label<V> = "SIMP device certificate 1";
///         opaque user<V>;          // the user's name, UTF-8
///         opaque device<V>;        // the device's name, UTF-8
///         opaque device_key<V>;    // Ed25519 public key, 32 bytes
///     } DeviceCertificateTBS;
///
/// The label keeps these signatures apart from anything else an identity key could be made to
/// sign (the identity key is not an MLS key, so no MLS `SignWithLabel` content can collide).
public enum DeviceCertificateTBS {
    public static let label = Array("SIMP device certificate 1".utf8)

    public static func bytes(user: String, device: String, deviceKey: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        for field in [label, Array(user.utf8), Array(device.utf8), deviceKey] {
            appendVarint(field.count, to: &out)
            out += field
        }
        return out
    }

    /// RFC 9420 section 2.1.2: 1, 2 or 4 bytes, the top two bits giving the length.
    static func appendVarint(_ value: Int, to out: inout [UInt8]) {
        switch value {
        case ..<0x40: out.append(UInt8(value))
        case ..<0x4000: out += [UInt8(0x40 | (value >> 8)), UInt8(value & 0xff)]
        default:
            out += [UInt8(0x80 | ((value >> 24) & 0x3f)), UInt8((value >> 16) & 0xff), UInt8((value >> 8) & 0xff), UInt8(value & 0xff)]
        }
    }
}

/// A device certificate as received (from a client, or from the server's directory): nothing
/// in it is trusted until `verified(by:)` checks it against the identity key.
public struct UnverifiedDeviceCertificate: Sendable, Hashable {
    public var user: String
    public var device: String
    public var deviceKey: [UInt8]
    public var signature: [UInt8]

    public init(user: String, _ certificate: Simp_DeviceCertificate) {
        self.init(user: user, device: certificate.device, deviceKey: Array(certificate.deviceKey), signature: Array(certificate.signature))
    }

    public init(user: String, device: String, deviceKey: [UInt8], signature: [UInt8]) {
        self.user = user
        self.device = device
        self.deviceKey = deviceKey
        self.signature = signature
    }

    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case badName
        case badDeviceKey
        case badSignature

        public var description: String {
            switch self {
            case .badName: "the certificate's user or device is not a valid name"
            case .badDeviceKey: "the device key is not an Ed25519 public key (32 bytes)"
            case .badSignature: "the certificate's signature does not verify under the identity key"
            }
        }
    }

    /// The certificate, if its names are valid, its device key is an Ed25519 key and its
    /// signature verifies under `identity` over `DeviceCertificateTBS`.
    public func verified(by identity: IdentityKey) throws(Problem) -> DeviceCertificate {
        guard UserName.isValid(user), DeviceName.isValid(device) else { throw .badName }
        guard IdentityKey(deviceKey) != nil else { throw .badDeviceKey }
        guard signature.count == 64,
              identity.key.isValidSignature(signature, for: DeviceCertificateTBS.bytes(user: user, device: device, deviceKey: deviceKey))
        else { throw .badSignature }
        return DeviceCertificate(checked: self, identity: identity)
    }
}

/// A device certificate whose signature verified under `identity`.
public struct DeviceCertificate: Sendable, Equatable {
    public let user: String
    public let device: String
    public let deviceKey: [UInt8]
    public let signature: [UInt8]
    public let identity: IdentityKey

    fileprivate init(checked: UnverifiedDeviceCertificate, identity: IdentityKey) {
        user = checked.user
        device = checked.device
        deviceKey = checked.deviceKey
        signature = checked.signature
        self.identity = identity
    }

    /// The certificate as it travels.
    public var wire: Simp_DeviceCertificate {
        var wire = Simp_DeviceCertificate()
        wire.device = device
        wire.deviceKey = Data(deviceKey)
        wire.signature = Data(signature)
        return wire
    }

    /// Signs `deviceKey` for `device` of `user` with the identity's private key (a client's
    /// side; the server never holds one).
    public static func sign(user: String, device: String, deviceKey: [UInt8],
                            identity: Curve25519.Signing.PrivateKey) throws -> Simp_DeviceCertificate {
        var wire = Simp_DeviceCertificate()
        wire.device = device
        wire.deviceKey = Data(deviceKey)
        wire.signature = try identity.signature(for: DeviceCertificateTBS.bytes(user: user, device: device, deviceKey: deviceKey))
        return wire
    }
}

/// The key directory's bounds and naming rules (docs/PROTOCOL.md, "Keys").
public enum KeyDirectoryRules {
    /// One-time KeyPackages in one `UploadKeyPackages`.
    public static let maxKeyPackagesPerUpload = 32
    /// The largest KeyPackage (as its `MLSMessage`) taken, one-time or last resort.
    public static let maxKeyPackageBytes = 4_096
    /// One-time KeyPackages stored per device.
    public static let maxPoolPerDevice = 100
    /// One-time KeyPackages one user may claim of another's devices in an hour; past it, claims
    /// hand out the last-resort packages only, so nobody can drain a user's one-time packages
    /// (docs/E2EE.md, "Who may claim").
    public static let oneTimeClaimsPerHour = 20

    /// The identity of the basic credential (RFC 9420 section 5.3) in a device's leaves: "USER/DEVICE".
    public static func credentialIdentity(user: String, device: String) -> [UInt8] {
        Array("\(user)/\(device)".utf8)
    }

    /// The user a credential identity names ("USER/DEVICE"), if it is a valid user's.
    public static func user(ofCredentialIdentity identity: [UInt8]) -> String? {
        guard let slash = identity.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let user = String(decoding: identity[..<slash], as: UTF8.self)
        return UserName.isValid(user) ? user : nil
    }
}
