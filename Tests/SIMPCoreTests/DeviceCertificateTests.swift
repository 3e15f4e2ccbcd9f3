import Crypto
import Foundation
import SIMPCore
import Testing

/// Device certificates (docs/E2EE.md, Part 2): what an identity signs, and that only an
/// untampered certificate signed by that identity verifies.
@Suite struct DeviceCertificateTests {
    static let identity = try! Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 1, count: 32))
    static let deviceKey = Array(try! Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 2, count: 32)).publicKey.rawRepresentation)
    static var identityKey: IdentityKey { IdentityKey(Array(identity.publicKey.rawRepresentation))! }

    static func certificate(user: String = "alice", device: String = "phone") throws -> UnverifiedDeviceCertificate {
        UnverifiedDeviceCertificate(user: user, try DeviceCertificate.sign(user: user, device: device, deviceKey: deviceKey, identity: identity))
    }

    @Test func theSignedBytesAreLabelUserDeviceAndKeyEachWithItsLength() {
        let bytes = DeviceCertificateTBS.bytes(user: "al", device: "p", deviceKey: [9, 9])
        let label = Array("SIMP device certificate 1".utf8)
        #expect(bytes == [UInt8(label.count)] + label + [2, 0x61, 0x6c] + [1, 0x70] + [2, 9, 9])
    }

    @Test func aCertificateSignedByTheIdentityVerifies() throws {
        let verified = try Self.certificate().verified(by: Self.identityKey)
        #expect(verified.device == "phone" && verified.deviceKey == Self.deviceKey && verified.identity == Self.identityKey)
    }

    @Test func anyChangeOrAnotherIdentityFailsTheSignature() throws {
        var otherUser = try Self.certificate()
        otherUser.user = "mallory"
        var otherDevice = try Self.certificate()
        otherDevice.device = "laptop"
        var otherKey = try Self.certificate()
        otherKey.deviceKey = Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation)
        var flipped = try Self.certificate()
        flipped.signature[5] ^= 1
        for certificate in [otherUser, otherDevice, otherKey, flipped] {
            #expect(throws: UnverifiedDeviceCertificate.Problem.badSignature) { try certificate.verified(by: Self.identityKey) }
        }
        let stranger = IdentityKey(Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation))!
        #expect(throws: UnverifiedDeviceCertificate.Problem.badSignature) { try Self.certificate().verified(by: stranger) }
    }

    @Test func badNamesAndKeysAreRefusedBeforeTheSignature() throws {
        var badName = try Self.certificate()
        badName.device = "Phone!"
        #expect(throws: UnverifiedDeviceCertificate.Problem.badName) { try badName.verified(by: Self.identityKey) }
        var shortKey = try Self.certificate()
        shortKey.deviceKey = [1, 2, 3]
        #expect(throws: UnverifiedDeviceCertificate.Problem.badDeviceKey) { try shortKey.verified(by: Self.identityKey) }
        #expect(IdentityKey([UInt8](repeating: 0, count: 31)) == nil)
    }
}

/// docs/vectors/device-certificate.json: the signed bytes of a few certificates, and a signature
/// by a fixed identity seed. The bytes must be what `DeviceCertificateTBS` makes now; the
/// signature must verify (Ed25519 signing need not be deterministic everywhere, so it is not
/// made again). `scripts/gen-vectors.sh` rewrites the file (its filter names this test too).
@Suite struct DeviceCertificateVectorTests {
    struct Vector: Codable, Equatable {
        var name: String
        var identitySeed: String
        var identityKey: String
        var user: String
        var device: String
        var deviceKey: String
        var signedBytes: String
        var signature: String
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/vectors/device-certificate.json").standardized

    static func made() throws -> [Vector] {
        let cases: [(String, UInt8, String, String, UInt8)] = [
            ("alice's phone", 1, "alice", "phone", 2),
            ("longest names", 3, "abcdefghijklmnopqrstuvwxyz012345", "device-16-bytes_", 4),
        ]
        return try cases.map { name, seed, user, device, keySeed in
            let identity = try Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: seed, count: 32))
            let deviceKey = Array(try Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: keySeed, count: 32)).publicKey.rawRepresentation)
            let signed = DeviceCertificateTBS.bytes(user: user, device: device, deviceKey: deviceKey)
            return Vector(name: name, identitySeed: VectorTests.hex([UInt8](repeating: seed, count: 32)),
                          identityKey: VectorTests.hex(identity.publicKey.rawRepresentation), user: user, device: device,
                          deviceKey: VectorTests.hex(deviceKey), signedBytes: VectorTests.hex(signed),
                          signature: VectorTests.hex(try identity.signature(for: signed)))
        }
    }

    @Test func theVectorFilesAreWhatTheCodecsMake() throws {
        var made = try Self.made()
        if VectorTests.writing {
            try VectorTests.encode(made).write(to: Self.file)
        }
        let onFile = try JSONDecoder().decode([Vector].self, from: Data(contentsOf: Self.file))
        #expect(onFile.count == made.count)
        for (index, vector) in onFile.enumerated() where index < made.count {
            made[index].signature = vector.signature
            #expect(vector == made[index], "docs/vectors/device-certificate.json differs from what the codecs make")
            let identity = try #require(IdentityKey(VectorTests.bytes(vector.identityKey)))
            let certificate = UnverifiedDeviceCertificate(user: vector.user, device: vector.device, deviceKey: VectorTests.bytes(vector.deviceKey),
                                                          signature: VectorTests.bytes(vector.signature))
            #expect(throws: Never.self) { try certificate.verified(by: identity) }
        }
    }
}
