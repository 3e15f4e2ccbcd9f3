import Crypto
import Foundation
import SIMPCore

/// A new device's link, as one of the user's other devices sees it (`SIMPClient.pendingLinks`).
public struct PendingLink: Sendable, Equatable {
    public var device: String
    /// The code to compare with the one the new device shows; nil until the new device
    /// answered this device's offer.
    public var code: String?
    /// Another of the user's devices offered first: this one cannot approve the link.
    public var offeredElsewhere: Bool

    public init(device: String, code: String?, offeredElsewhere: Bool) {
        (self.device, self.code, self.offeredElsewhere) = (device, code, offeredElsewhere)
    }
}

/// What a device holding the identity does with the user's links (`LinkPlan.plan`). Pure.
enum LinkPlan {
    enum Step: Equatable {
        /// Offer to link this new device (its request, as fetched).
        case offer(device: String, request: DeviceLink.Request)
        /// Decline: its reveal does not open its commitment (someone else answered).
        case decline(device: String)
    }

    /// From the links the server keeps, this device's name and the offers it made: the steps to
    /// take and what to show. A link this device offered to is shown with its code once the
    /// reveal matches the request it offered to (as it was then, not as the server shows it
    /// now); a new request is offered to; a request changed since the offer is offered to again
    /// only after the server dropped the old offer (a new request clears it).
    static func plan(_ records: [Simp_LinkRecord], device own: String, offers: [String: OfferedLink]) -> (steps: [Step], shown: [PendingLink]) {
        var steps: [Step] = []
        var shown: [PendingLink] = []
        for record in records where record.device != own && !record.declined && record.grant.isEmpty {
            guard let request = try? DeviceLink.Request(bytes: Array(record.request)) else { continue }
            if record.offeredBy.isEmpty {
                steps.append(.offer(device: record.device, request: request))
                shown.append(PendingLink(device: record.device, code: nil, offeredElsewhere: false))
            } else if record.offeredBy != own {
                shown.append(PendingLink(device: record.device, code: nil, offeredElsewhere: true))
            } else if let offered = offers[record.device], offered.request == request {
                guard !record.reveal.isEmpty else {
                    shown.append(PendingLink(device: record.device, code: nil, offeredElsewhere: false))
                    continue
                }
                do {
                    let revealed = try offered.revealed(by: DeviceLink.Reveal(bytes: Array(record.reveal)))
                    shown.append(PendingLink(device: record.device, code: revealed.code, offeredElsewhere: false))
                } catch {
                    steps.append(.decline(device: record.device))
                }
            }
            // This device offered, but to an earlier request (the new device started again
            // after this offer): the server dropped the offer with the new request, so it is
            // offered to afresh on the next look.
        }
        return (steps, shown)
    }
}

/// Linking a device (docs/E2EE.md, "Linking a device"): the new device asks with
/// `linkThisDevice`, a device holding the identity offers and shows the code with
/// `pendingLinks`, and the user approves there with `approveLink` after comparing the codes.
extension SIMPClient {
    /// Polls of the link while waiting for the other device: every 300 ms.
    static let linkPollMillis = 300

    /// Links this device to the user's identity from another of the user's devices: asks,
    /// then waits (at most `timeoutSeconds`, polling) for another device's offer, then calls
    /// `showCode` with the code the user must type there (`/device approve NAME CODE`), then
    /// waits for the grant and publishes this device's certificate. Returns `.ready` once
    /// linked; an identity already held here returns at once.
    public func linkThisDevice(timeoutSeconds: Int = 600, showCode: @Sendable (String) -> Void) async throws(ClientError) -> IdentityState {
        let state = try await setUpIdentity()
        guard state == .needsLinking else { return state }
        let store = try await identityStore()
        let linking = LinkingDevice(user: store.user, device: try await currentDevice())
        try await linkStep(.linkRequest, device: linking.device, body: linking.request.bytes)
        let polls = max(1, timeoutSeconds * 1000 / Self.linkPollMillis)
        let offered = try await pollLink(linking.device, polls: polls) { !$0.offer.isEmpty }
        let offer: DeviceLink.Offer
        do throws(DeviceLink.Problem) {
            offer = try DeviceLink.Offer(bytes: Array(offered.offer))
        } catch {
            try? await linkStep(.linkDecline, device: linking.device, body: [])
            throw ClientError("\(offered.offeredBy)'s offer: \(error)", code: .badRequest)
        }
        try await linkStep(.linkReveal, device: linking.device, body: linking.reveal.bytes)
        showCode(linking.code(for: offer))
        let granted = try await pollLink(linking.device, polls: polls) { !$0.grant.isEmpty }
        let identity: Curve25519.Signing.PrivateKey
        do throws(DeviceLink.Problem) {
            identity = try linking.open(DeviceLink.Grant(bytes: Array(granted.grant)), offer: offer)
        } catch {
            throw ClientError("not linked: \(error)", code: .endToEnd)
        }
        let keys = ClientStore.OwnKeys(identityKey: Array(identity.rawRepresentation), deviceKey: Array(linking.deviceKey.rawRepresentation),
                                       published: false)
        try saveKeys(keys, in: store)
        return try await setUpIdentity()
    }

    /// The user's new devices asking to be linked: this device offers to each that no device
    /// answered yet, then waits up to `waitSeconds` for their codes. A link shown with a code
    /// can be approved here (`approveLink`) once the user saw the same code on the new device.
    /// Needs this device to hold the identity.
    public func pendingLinks(waitSeconds: Int = 5) async throws(ClientError) -> [PendingLink] {
        let (user, identity, own) = try await heldIdentity()
        let store = try await identityStore()
        var shown: [PendingLink] = []
        for poll in 0...max(0, waitSeconds * 1000 / Self.linkPollMillis) {
            let records = try await linkRecords(device: nil)
            let offers: [String: OfferedLink]
            do { offers = try store.linkOffers() } catch { throw ClientError("cannot read the link offers in \(store.path): \(error)") }
            let plan = LinkPlan.plan(records, device: own, offers: offers)
            for step in plan.steps {
                switch step {
                case .offer(let device, let request):
                    let offered = OfferedLink(user: user, device: device, request: request, identityKey: Array(identity.publicKey.rawRepresentation))
                    // Kept before it is sent: an offer the server took is always one this device can finish.
                    try keep(offered, device: device, in: store)
                    try await linkStep(.linkOffer, device: device, body: offered.offer.bytes)
                case .decline(let device):
                    try? await linkStep(.linkDecline, device: device, body: [])
                    try keep(nil, device: device, in: store)
                }
            }
            shown = plan.shown
            let waiting = shown.contains { $0.code == nil && !$0.offeredElsewhere } || !plan.steps.isEmpty
            guard waiting, poll * Self.linkPollMillis < waitSeconds * 1000 else { break }
            try? await Task.sleep(for: .milliseconds(Self.linkPollMillis))
        }
        return shown
    }

    /// Approves `device`'s link with `code`, the code the new device shows: if it is this
    /// link's code (`pendingLinks` showed it), the identity's private key goes to the new
    /// device, sealed to the key it asked with. A different code declines the link.
    public func approveLink(device: String, code: String) async throws(ClientError) {
        let (_, identity, _) = try await heldIdentity()
        let store = try await identityStore()
        guard let offered = try? store.linkOffer(to: device) else {
            throw ClientError("this device made no offer to link \(device): list the links first (/device links)", code: .endToEnd)
        }
        guard let record = try await linkRecords(device: device).first, !record.declined,
              (try? DeviceLink.Request(bytes: Array(record.request))) == offered.request, !record.reveal.isEmpty else {
            throw ClientError("\(device)'s link is not waiting for approval here: list the links again (/device links)", code: .endToEnd)
        }
        let grant: DeviceLink.Grant
        do throws(DeviceLink.Problem) {
            grant = try offered.revealed(by: DeviceLink.Reveal(bytes: Array(record.reveal))).grant(identity: identity, typed: code)
        } catch {
            try? await linkStep(.linkDecline, device: device, body: [])
            try keep(nil, device: device, in: store)
            throw ClientError("\(error); \(device)'s link is declined", code: .endToEnd)
        }
        try await linkStep(.linkGrant, device: device, body: grant.bytes)
        try keep(nil, device: device, in: store)
    }

    private func keep(_ offered: OfferedLink?, device: String, in store: ClientStore) throws(ClientError) {
        do { try store.keepLinkOffer(offered, device: device) } catch { throw ClientError("cannot keep the link offer in \(store.path): \(error)") }
    }

    // MARK: parts

    /// The user, the identity's private key and this device's name; throws unless this device
    /// holds the identity.
    private func heldIdentity() async throws(ClientError) -> (String, Curve25519.Signing.PrivateKey, String) {
        let store = try await identityStore()
        guard let own = try? store.ownKeys(), let identity = try? Curve25519.Signing.PrivateKey(rawRepresentation: own.identityKey) else {
            throw ClientError("this device holds no identity: link it from a device that does", code: .endToEnd)
        }
        return (store.user, identity, try await currentDevice())
    }

    func linkStep(_ kind: Simp_LinkStepKind, device: String, body: [UInt8]) async throws(ClientError) {
        var step = Simp_LinkStep()
        step.kind = kind
        step.device = device
        step.body = Data(body)
        _ = try await ask(.linkStep(step), "a link step") { body in
            if case .ok? = body { () } else { nil }
        }
    }

    func linkRecords(device: String?) async throws(ClientError) -> [Simp_LinkRecord] {
        var fetch = Simp_LinkFetch()
        fetch.device = device ?? ""
        return try await ask(.linkFetch(fetch), "a link fetch") { body in
            if case .linkRecords(let records)? = body { records.links } else { nil }
        }
    }

    /// Polls `device`'s link until `done`; throws if it was declined, is gone, or `polls` ran out.
    private func pollLink(_ device: String, polls: Int, until done: (Simp_LinkRecord) -> Bool) async throws(ClientError) -> Simp_LinkRecord {
        for _ in 0..<polls {
            guard let record = try await linkRecords(device: device).first else {
                throw ClientError("the link of \(device) is gone (it expired): link again", code: .endToEnd)
            }
            if record.declined {
                throw ClientError("the link was declined on \(record.offeredBy.isEmpty ? "another device" : record.offeredBy) (were the codes different?)",
                                  code: .endToEnd)
            }
            if done(record) { return record }
            try? await Task.sleep(for: .milliseconds(Self.linkPollMillis))
        }
        try? await linkStep(.linkDecline, device: device, body: [])
        throw ClientError("no device of the user answered the link in time: run /device links on one that holds the identity", code: .endToEnd)
    }
}
