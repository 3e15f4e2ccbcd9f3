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
