import Crypto
import Foundation
import SIMPCore
import Testing

/// The link's cryptography (docs/E2EE.md, "Linking a device"), pure: both sides compute one
/// code; a reveal that does not open the commitment, a wrong code, or a grant for another
/// identity key is refused; a server that swaps the request, the offer or the reveal makes the
/// codes differ; every body decodes only at its size and version.
@Suite struct DeviceLinkTests {
    static let identity = Curve25519.Signing.PrivateKey()

    /// A new device and the existing device's offer to it, as the server relayed them.
    static func link(user: String = "alice", device: String = "laptop") -> (LinkingDevice, OfferedLink) {
        let new = LinkingDevice(user: user, device: device)
        let offered = OfferedLink(user: user, device: device, request: new.request, identityKey: Array(identity.publicKey.rawRepresentation))
        return (new, offered)
    }

    @Test func bothSidesShowOneCodeAndTheGrantHoldsTheIdentity() throws {
        let (new, offered) = Self.link()
        let revealed = try offered.revealed(by: new.reveal)
        #expect(revealed.code == new.code(for: offered.offer))
        #expect(revealed.code.count == 6 && revealed.code.allSatisfy(\.isNumber))
        let grant = try revealed.grant(identity: Self.identity, typed: revealed.code)
        let received = try new.open(DeviceLink.Grant(bytes: grant.bytes), offer: DeviceLink.Offer(bytes: offered.offer.bytes))
        #expect(received.rawRepresentation == Self.identity.rawRepresentation)
    }

    @Test func aRevealThatDoesNotOpenTheCommitmentIsRefused() throws {
        let (_, offered) = Self.link()
        let other = LinkingDevice(user: "alice", device: "laptop")
        #expect(throws: DeviceLink.Problem.commitmentMismatch) { try offered.revealed(by: other.reveal) }
    }

    @Test func aWrongCodeGetsNoGrant() throws {
        let (new, offered) = Self.link()
        let revealed = try offered.revealed(by: new.reveal)
        let wrong = String(format: "%06d", (Int(revealed.code)! + 1) % 1_000_000)
        #expect(throws: DeviceLink.Problem.codeMismatch) { try revealed.grant(identity: Self.identity, typed: wrong) }
        #expect(throws: DeviceLink.Problem.codeMismatch) { try revealed.grant(identity: Self.identity, typed: revealed.code + "1") }
        // Spaces the user typed between digits do not matter.
        let spaced = String(revealed.code.prefix(3)) + " " + String(revealed.code.suffix(3))
        #expect((try? revealed.grant(identity: Self.identity, typed: spaced)) != nil)
    }

    /// A server that relays its own request to the existing device (its key, to get the
    /// identity), or its own offer to the new device (to give it a key of its own): the code
    /// each device shows then covers different bodies. With fixed keys and nonces the codes
    /// are fixed, so this checks they differ, not that they probably do.
    @Test func aSwappedBodyChangesTheCode() throws {
        let keys = (0..<4).map { _ in Curve25519.Signing.PrivateKey() }
        let hpke = (0..<2).map { _ in Curve25519.KeyAgreement.PrivateKey() }
        let nonce = [UInt8](repeating: 7, count: 32)
        let new = LinkingDevice(user: "alice", device: "laptop", deviceKey: keys[0], hpkeKey: hpke[0], nonce: nonce)
        let server = LinkingDevice(user: "alice", device: "laptop", deviceKey: keys[1], hpkeKey: hpke[1], nonce: nonce)
        let offer = DeviceLink.Offer(identityKey: Array(keys[2].publicKey.rawRepresentation), nonce: [UInt8](repeating: 9, count: 32))
        let shownByNew = new.code(for: offer)
        let shownByExisting = try OfferedLink(user: "alice", device: "laptop", request: server.request, offer: offer).revealed(by: server.reveal).code
        #expect(shownByNew != shownByExisting)
        let otherOffer = DeviceLink.Offer(identityKey: Array(keys[3].publicKey.rawRepresentation), nonce: offer.nonce)
        #expect(new.code(for: otherOffer) != shownByNew)
        #expect(LinkingDevice(user: "alice", device: "tablet", deviceKey: keys[0], hpkeKey: hpke[0], nonce: nonce).code(for: offer) != shownByNew,
                "the device's name is in the code")
    }

    @Test func aGrantForAnotherKeyOrLinkDoesNotOpen() throws {
        let (new, offered) = Self.link()
        let revealed = try offered.revealed(by: new.reveal)
        let grant = try revealed.grant(identity: Self.identity, typed: revealed.code)
        // The server offered its own identity key to the new device: the grant (for the real
        // one) does not match it.
        let swapped = DeviceLink.Offer(identityKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation), nonce: offered.offer.nonce)
        #expect(throws: DeviceLink.Problem.badGrant) { try new.open(grant, offer: swapped) }
        // A grant made for another link does not open here.
        let (other, otherOffered) = Self.link()
        let otherRevealed = try otherOffered.revealed(by: other.reveal)
        let otherGrant = try otherRevealed.grant(identity: Self.identity, typed: otherRevealed.code)
        #expect(throws: DeviceLink.Problem.badGrant) { try new.open(otherGrant, offer: offered.offer) }
        // The existing device grants only the identity it offered.
        #expect(throws: DeviceLink.Problem.badGrant) { try revealed.grant(identity: Curve25519.Signing.PrivateKey(), typed: revealed.code) }
    }

    @Test func bodiesDecodeOnlyAtTheirSizeAndVersion() throws {
        let (new, offered) = Self.link()
        #expect(try DeviceLink.Request(bytes: new.request.bytes) == new.request)
        #expect(try DeviceLink.Offer(bytes: offered.offer.bytes) == offered.offer)
        #expect(try DeviceLink.Reveal(bytes: new.reveal.bytes) == new.reveal)
        for bytes in [[], Array(new.request.bytes.dropLast()), new.request.bytes + [0], [2] + new.request.bytes.dropFirst()] {
            #expect(throws: DeviceLink.Problem.self) { try DeviceLink.Request(bytes: Array(bytes)) }
        }
        #expect(throws: DeviceLink.Problem.self) { try DeviceLink.Offer(bytes: new.request.bytes) }
        #expect(throws: DeviceLink.Problem.self) { try DeviceLink.Reveal(bytes: [1]) }
        #expect(throws: DeviceLink.Problem.self) { try DeviceLink.Grant(bytes: [UInt8](repeating: 1, count: 80)) }
    }
}

/// docs/vectors/device-link.json: links made from fixed seeds and nonces: the four bodies and
/// the code must be what `DeviceLink` makes now; the grant (HPKE draws its ephemeral key, so it
/// is not made again) must open to the identity seed. `scripts/gen-vectors.sh` rewrites the
/// file (its filter names this test too).
@Suite struct DeviceLinkVectorTests {
    struct Vector: Codable, Equatable {
        var name: String
        var user: String
        var device: String
        var deviceKeySeed: String
        var hpkeKeySeed: String
        var newDeviceNonce: String
        var identitySeed: String
        var offerNonce: String
        var request: String
        var offer: String
        var reveal: String
        var code: String
        var grant: String
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/vectors/device-link.json").standardized

    static func made() throws -> [Vector] {
        let cases: [(String, String, String, UInt8)] = [("alice's laptop", "alice", "laptop", 1), ("longest names", "abcdefghijklmnopqrstuvwxyz012345", "device-16-bytes_", 5)]
        return try cases.map { name, user, device, seed in
            let fill = { (offset: UInt8) in [UInt8](repeating: seed &+ offset, count: 32) }
            let identity = try Curve25519.Signing.PrivateKey(rawRepresentation: fill(3))
            let new = LinkingDevice(user: user, device: device, deviceKey: try .init(rawRepresentation: fill(0)),
                                    hpkeKey: try .init(rawRepresentation: fill(1)), nonce: fill(2))
            let offered = OfferedLink(user: user, device: device, request: new.request,
                                      offer: DeviceLink.Offer(identityKey: Array(identity.publicKey.rawRepresentation), nonce: fill(4)))
            let revealed = try offered.revealed(by: new.reveal)
            let grant = try revealed.grant(identity: identity, typed: revealed.code)
            return Vector(name: name, user: user, device: device, deviceKeySeed: VectorTests.hex(fill(0)), hpkeKeySeed: VectorTests.hex(fill(1)),
                          newDeviceNonce: VectorTests.hex(fill(2)), identitySeed: VectorTests.hex(fill(3)), offerNonce: VectorTests.hex(fill(4)),
                          request: VectorTests.hex(new.request.bytes), offer: VectorTests.hex(offered.offer.bytes),
                          reveal: VectorTests.hex(new.reveal.bytes), code: revealed.code, grant: VectorTests.hex(grant.bytes))
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
            made[index].grant = vector.grant
            #expect(vector == made[index], "docs/vectors/device-link.json differs from what DeviceLink makes")
            let new = LinkingDevice(user: vector.user, device: vector.device, deviceKey: try .init(rawRepresentation: VectorTests.bytes(vector.deviceKeySeed)),
                                    hpkeKey: try .init(rawRepresentation: VectorTests.bytes(vector.hpkeKeySeed)), nonce: VectorTests.bytes(vector.newDeviceNonce))
            let identity = try new.open(DeviceLink.Grant(bytes: VectorTests.bytes(vector.grant)), offer: DeviceLink.Offer(bytes: VectorTests.bytes(vector.offer)))
            #expect(Array(identity.rawRepresentation) == VectorTests.bytes(vector.identitySeed))
        }
    }
}
