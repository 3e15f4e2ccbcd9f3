import Crypto
import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Linking a device (section 4, Linking a device): the server relays the four steps between
    /// two devices of one user, in order, each from the device that may take it.
    static let links: [ConformanceCheck] = [
        ConformanceCheck("4.23", "4. Messages, Linking a device",
                         "a link's request, offer, reveal and grant are relayed unchanged between two devices of one user; a step out of order, or by a device that may not take it, is LINK_STEP") { target in
            let (user, password) = try target.account("a")
            let existing = try target.peer()
            _ = try existing.login(user, password, device: "default")
            let new = try target.peer()
            _ = try new.login(user, password, device: "linked")
            func step(_ peer: RawPeer, _ id: UInt64, _ kind: Simp_LinkStepKind, _ body: [UInt8]) throws -> Simp_Envelope? {
                try peer.request(id, .linkStep(.with { $0.kind = kind; $0.device = "linked"; $0.body = Data(body) }))
            }
            // The bodies are the devices' (docs/E2EE.md): a real link, so they are what a client sends.
            let identity = Curve25519.Signing.PrivateKey()
            let linking = LinkingDevice(user: user, device: "linked")
            let offered = OfferedLink(user: user, device: "linked", request: linking.request, identityKey: Array(identity.publicKey.rawRepresentation))
            guard case .ok? = try step(new, 2, .linkRequest, linking.request.bytes)?.body else { throw ConformanceFailure("the request was not taken") }
            let early = try step(new, 3, .linkReveal, linking.reveal.bytes)
            try expect(errorCode(early) == .linkStep, "a reveal before an offer got \(describe(early))")
            let own = try step(new, 4, .linkOffer, offered.offer.bytes)
            try expect(errorCode(own) == .linkStep, "an offer by the new device to itself got \(describe(own))")
            guard case .ok? = try step(existing, 2, .linkOffer, offered.offer.bytes)?.body else { throw ConformanceFailure("the offer was not taken") }
            guard case .linkRecords(let seen)? = try new.request(5, .linkFetch(.with { $0.device = "linked" }))?.body,
                  let record = seen.links.first else { throw ConformanceFailure("the new device could not fetch its link") }
            try expect(record.offer == Data(offered.offer.bytes) && record.offeredBy == "default", "the offer fetched: \(record)")
            guard case .ok? = try step(new, 6, .linkReveal, linking.reveal.bytes)?.body else { throw ConformanceFailure("the reveal was not taken") }
            let revealed = try offered.revealed(by: linking.reveal)
            let grant = try revealed.grant(identity: identity, typed: linking.code(for: offered.offer))
            guard case .ok? = try step(existing, 3, .linkGrant, grant.bytes)?.body else { throw ConformanceFailure("the grant was not taken") }
            let twice = try step(existing, 4, .linkGrant, grant.bytes)
            try expect(errorCode(twice) == .linkStep, "a second grant got \(describe(twice))")
            guard case .linkRecords(let done)? = try new.request(7, .linkFetch(.with { $0.device = "linked" }))?.body,
                  let granted = done.links.first else { throw ConformanceFailure("the new device could not fetch its grant") }
            let received = try linking.open(DeviceLink.Grant(bytes: Array(granted.grant)), offer: DeviceLink.Offer(bytes: Array(granted.offer)))
            try expect(received.rawRepresentation == identity.rawRepresentation, "the grant relayed does not hold the identity")
        },
    ]
}
