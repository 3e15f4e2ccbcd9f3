import Crypto
import Foundation
import SIMPCore

/// A device certificate to publish (`SIMPClient.publishDevice`): the user's identity key signed
/// this device's key under its name (docs/E2EE.md, "Device certificates").
public struct CertifiedDevice: Sendable, Equatable {
    public var device: String
    /// Ed25519 public key, 32 bytes.
    public var deviceKey: [UInt8]
    /// Ed25519 signature by the identity key over `DeviceCertificateTBS`, 64 bytes.
    public var signature: [UInt8]

    public init(device: String, deviceKey: [UInt8], signature: [UInt8]) {
        self.device = device
        self.deviceKey = deviceKey
        self.signature = signature
    }

    /// Signs `deviceKey` for `device` of `user` with the identity's private key (a client's
    /// side; the server never holds one).
    public static func sign(user: String, device: String, deviceKey: [UInt8],
                            identity: Curve25519.Signing.PrivateKey) throws -> CertifiedDevice {
        let wire = try DeviceCertificate.sign(user: user, device: device, deviceKey: deviceKey, identity: identity)
        return CertifiedDevice(device: wire.device, deviceKey: Array(wire.deviceKey), signature: Array(wire.signature))
    }

    /// As the server gave it.
    init(_ wire: Simp_DeviceCertificate) {
        self.init(device: wire.device, deviceKey: Array(wire.deviceKey), signature: Array(wire.signature))
    }

    /// As it travels.
    var wire: Simp_DeviceCertificate {
        var wire = Simp_DeviceCertificate()
        wire.device = device
        wire.deviceKey = Data(deviceKey)
        wire.signature = Data(signature)
        return wire
    }
}

/// A user's entry in the server's key directory (docs/E2EE.md, Part 2): as the server gave it,
/// so nothing in it is trusted. `verifiedDevices` keeps the certificates that verify under the
/// identity key; whether the identity key itself is the user's is the caller's to establish
/// (safety numbers).
public struct KeyDirectoryEntry: Sendable, Equatable {
    public var user: String
    public var identityKey: [UInt8]
    /// When this identity key was published, by the server's clock.
    public var identitySince: Date
    /// The device certificates as the server gave them: unverified.
    public var devices: [CertifiedDevice]
    /// Certificates of this identity's devices since revoked, or replaced under their name by
    /// another key, as the server gave them (unverified): for checking the leaves of commits made
    /// while they were certified, never for adding a device (docs/E2EE.md, Part 2, "Revoked devices").
    public var revokedDevices: [CertifiedDevice]

    public init(user: String, identityKey: [UInt8], identitySince: Date, devices: [CertifiedDevice], revokedDevices: [CertifiedDevice] = []) {
        self.user = user
        self.identityKey = identityKey
        self.identitySince = identitySince
        self.devices = devices
        self.revokedDevices = revokedDevices
    }

    /// The device certificates whose signatures verify under `identityKey`, in the entry's
    /// order; none if the identity key is no Ed25519 key.
    public var verifiedDevices: [VerifiedDevice] {
        guard let identity = IdentityKey(identityKey) else { return [] }
        return devices.compactMap { device in
            let unverified = UnverifiedDeviceCertificate(user: user, device: device.device, deviceKey: device.deviceKey, signature: device.signature)
            return (try? unverified.verified(by: identity)).map(VerifiedDevice.init)
        }
    }
}

/// A device whose certificate verified under its user's identity key (`KeyDirectoryEntry.verifiedDevices`):
/// made only by that check.
public struct VerifiedDevice: Sendable, Equatable {
    public let user: String
    public let device: String
    /// Ed25519 public key, 32 bytes.
    public let deviceKey: [UInt8]
    /// The identity key the certificate verified under.
    public let identityKey: [UInt8]

    init(_ certificate: DeviceCertificate) {
        user = certificate.user
        device = certificate.device
        deviceKey = certificate.deviceKey
        identityKey = certificate.identity.rawRepresentation
    }
}

/// One device's KeyPackage handed out by a claim: an `MLSMessage` (RFC 9420 section 6), to be
/// validated by the claimer (its signature key must be the device's certified key).
public struct ClaimedKeyPackage: Sendable, Equatable {
    public var device: String
    public var keyPackage: [UInt8]
    /// The device's last-resort package (its one-time ones ran out): handed out again to others.
    public var lastResort: Bool
}

/// What a device's pool holds after an upload.
public struct KeyPackagePool: Sendable, Equatable {
    public var oneTime: Int
    public var lastResort: Bool

    public init(oneTime: Int, lastResort: Bool) {
        self.oneTime = oneTime
        self.lastResort = lastResort
    }
}

/// The key directory's requests (docs/PROTOCOL.md, "Keys"): each one request and its answer.
/// The server checks signatures against what it stores, but a client verifies what it fetches
/// or claims itself.
extension SIMPClient {
    /// Publishes the user's identity key (Ed25519, 32 bytes). With `replace`, a new identity:
    /// the server drops every device certificate and KeyPackage of the user. Without it, a
    /// different key stored already is `IDENTITY_EXISTS`.
    public func publishIdentity(_ key: [UInt8], replace: Bool = false) async throws(ClientError) {
        var publish = Simp_PublishIdentity()
        publish.identityKey = Data(key)
        publish.replace = replace
        _ = try await ask(.publishIdentity(publish), "an identity publish") { body in
            if case .ok? = body { () } else { nil }
        }
    }

    /// Publishes a device certificate (made by `CertifiedDevice.sign`) for one of the user's devices.
    public func publishDevice(_ certificate: CertifiedDevice) async throws(ClientError) {
        var publish = Simp_PublishDevice()
        publish.certificate = certificate.wire
        _ = try await ask(.publishDevice(publish), "a device certificate publish") { body in
            if case .ok? = body { () } else { nil }
        }
    }

    /// Uploads one-time KeyPackages of this device (each an `MLSMessage` signed by its certified
    /// key), and optionally its last-resort one.
    public func uploadKeyPackages(_ packages: [[UInt8]], lastResort: [UInt8]? = nil) async throws(ClientError) -> KeyPackagePool {
        var upload = Simp_UploadKeyPackages()
        upload.keyPackages = packages.map { Data($0) }
        if let lastResort { upload.lastResort = Data(lastResort) }
        return try await ask(.uploadKeyPackages(upload), "a KeyPackage upload") { body in
            if case .keyPackagesStored(let stored)? = body { KeyPackagePool(oneTime: Int(stored.pool), lastResort: stored.lastResort) } else { nil }
        }
    }

    /// `user`'s identity key and device certificates, unverified.
    public func keyDirectory(of user: String) async throws(ClientError) -> KeyDirectoryEntry {
        var request = Simp_KeyDirectoryRequest()
        request.user = user
        return try await ask(.keyDirectory(request), "a key directory request") { body in
            guard case .keyDirectoryEntry(let entry)? = body else { return nil }
            return KeyDirectoryEntry(user: entry.user, identityKey: Array(entry.identityKey), identitySince: Date(millis: entry.identitySince),
                                     devices: entry.devices.map(CertifiedDevice.init), revokedDevices: entry.revokedDevices.map(CertifiedDevice.init))
        }
    }

    /// One KeyPackage per certified device of `user` (this device left out when `user` is the
    /// user itself), by device name.
    public func claimKeyPackages(of user: String) async throws(ClientError) -> [ClaimedKeyPackage] {
        var request = Simp_ClaimKeyPackages()
        request.user = user
        return try await ask(.claimKeyPackages(request), "a KeyPackage claim") { body in
            guard case .claimedKeyPackages(let claimed)? = body else { return nil }
            return claimed.packages.map { ClaimedKeyPackage(device: $0.device, keyPackage: Array($0.keyPackage), lastResort: $0.lastResort) }
        }
    }
}
