import Crypto
import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// The key directory (section 4, Keys). Each check starts with a new identity of its own
    /// (`replace`), which drops whatever an earlier run left, so runs can reuse the accounts.
    static let keys: [ConformanceCheck] = [
        ConformanceCheck("4.15", "4. Messages, Keys", "an identity is set once (another is IDENTITY_EXISTS without replace); a device certificate by it is stored and fetched by another user, one by another key is BAD_SIGNATURE") { target in
            let (user, peer, identity) = try keyOwner(target)
            let again = try peer.request(3, .publishIdentity(.with { $0.identityKey = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation }))
            try expect(errorCode(again) == .identityExists, "a second identity without replace got \(describe(again))")
            let deviceKey = Curve25519.Signing.PrivateKey()
            let forged = try DeviceCertificate.sign(user: user, device: "default", deviceKey: Array(deviceKey.publicKey.rawRepresentation),
                                                    identity: Curve25519.Signing.PrivateKey())
            let refused = try peer.request(4, .publishDevice(.with { $0.certificate = forged }))
            try expect(errorCode(refused) == .badSignature, "a certificate by another key got \(describe(refused))")
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 5)

            let (other, otherPassword) = try target.account("b")
            let reader = try target.peer()
            _ = try reader.login(other, otherPassword)
            let reply = try reader.request(2, .keyDirectory(.with { $0.user = user }))
            guard case .keyDirectoryEntry(let entry)? = reply?.body else { throw ConformanceFailure("keyDirectory: \(describe(reply))") }
            try expect(entry.identityKey == identity.publicKey.rawRepresentation, "the identity key fetched is not the one published")
            try expect(entry.devices.map(\.device) == ["default"] && entry.devices[0].deviceKey == deviceKey.publicKey.rawRepresentation,
                       "the certificates fetched: \(entry.devices.map(\.device))")
        },
        ConformanceCheck("4.16", "4. Messages, Keys", "KeyPackages: garbage is INVALID_KEY_PACKAGE, another key's DEVICE_NOT_CERTIFIED; a claim takes the one-time package, then the last resort, which stays") { target in
            let (user, peer, identity) = try keyOwner(target)
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let garbage = try peer.request(4, .uploadKeyPackages(.with { $0.keyPackages = [Data(repeating: 7, count: 100)] }))
            try expect(errorCode(garbage) == .invalidKeyPackage, "garbage got \(describe(garbage))")
            let stranger = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: Curve25519.Signing.PrivateKey())
            let uncertified = try peer.request(5, .uploadKeyPackages(.with { $0.keyPackages = [Data(stranger)] }))
            try expect(errorCode(uncertified) == .deviceNotCertified, "a package of an uncertified key got \(describe(uncertified))")
            let oneTime = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: deviceKey)
            let lastResort = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: deviceKey)
            let stored = try peer.request(6, .uploadKeyPackages(.with { $0.keyPackages = [Data(oneTime)]; $0.lastResort = Data(lastResort) }))
            guard case .keyPackagesStored(let pool)? = stored?.body else { throw ConformanceFailure("upload: \(describe(stored))") }
            try expect(pool.pool == 1 && pool.lastResort, "after the upload: \(pool.pool) one-time, last resort \(pool.lastResort)")

            let (other, otherPassword) = try target.account("b")
            let claimer = try target.peer()
            _ = try claimer.login(other, otherPassword)
            var claimed: [Simp_ClaimedKeyPackage] = []
            for id in UInt64(2)...4 {
                let reply = try claimer.request(id, .claimKeyPackages(.with { $0.user = user }))
                guard case .claimedKeyPackages(let answer)? = reply?.body, answer.packages.count == 1 else {
                    throw ConformanceFailure("claim \(id - 1): \(describe(reply))")
                }
                claimed.append(answer.packages[0])
            }
            try expect(claimed[0].keyPackage == Data(oneTime) && !claimed[0].lastResort, "the first claim did not hand out the one-time package")
            try expect(claimed.dropFirst().allSatisfy { $0.keyPackage == Data(lastResort) && $0.lastResort },
                       "the later claims did not hand out the last-resort package, twice")
        },
        ConformanceCheck("4.24", "4. Messages, Keys", "a claim by a user the owner blocked is NOT_A_CONTACT, as a message would be; unblocked, it is answered") { target in
            let (user, peer, identity) = try keyOwner(target)
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let lastResort = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: deviceKey)
            _ = try peer.request(4, .uploadKeyPackages(.with { $0.lastResort = Data(lastResort) }))
            let (other, otherPassword) = try target.account("b")
            let claimer = try target.peer()
            _ = try claimer.login(other, otherPassword)
            try strangers(claimer, other, peer, user)
            _ = try peer.request(5, .contactRequest(.with { $0.action = .block; $0.user = other }))
            let refused = try claimer.request(2, .claimKeyPackages(.with { $0.user = user }))
            try expect(errorCode(refused) == .notAContact, "a blocked claimer got \(describe(refused))")
            _ = try peer.request(6, .contactRequest(.with { $0.action = .unblock; $0.user = other }))
            let answered = try claimer.request(3, .claimKeyPackages(.with { $0.user = user }))
            guard case .claimedKeyPackages(let claimed)? = answered?.body, claimed.packages.count == 1 else {
                throw ConformanceFailure("an unblocked claim: \(describe(answered))")
            }
        },
        ConformanceCheck("4.32", "4. Messages, Keys", "a certificate replaced under its device's name by another key, or revoked, is listed in revokedDevices, oldest first, and not in devices; a new identity ends them") { target in
            let (user, peer, identity) = try keyOwner(target)
            let (first, second, tablet) = (Curve25519.Signing.PrivateKey(), Curve25519.Signing.PrivateKey(), Curve25519.Signing.PrivateKey())
            try certify(peer, user: user, identity: identity, deviceKey: first, id: 3)
            try certify(peer, user: user, identity: identity, deviceKey: second, id: 4)
            try certify(peer, user: user, identity: identity, deviceKey: tablet, id: 5, device: "tablet")
            let revoked = try peer.request(6, .revokeDevice(.with { $0.name = "tablet" }))
            guard case .ok? = revoked?.body else { throw ConformanceFailure("revokeDevice: \(describe(revoked))") }
            let reply = try peer.request(7, .keyDirectory(.with { $0.user = user }))
            guard case .keyDirectoryEntry(let entry)? = reply?.body else { throw ConformanceFailure("keyDirectory: \(describe(reply))") }
            try expect(entry.devices.map(\.deviceKey) == [second.publicKey.rawRepresentation], "devices: \(entry.devices.map(\.device))")
            try expect(entry.revokedDevices.map(\.device) == ["default", "tablet"]
                       && entry.revokedDevices.map(\.deviceKey) == [first.publicKey.rawRepresentation, tablet.publicKey.rawRepresentation],
                       "revokedDevices: \(entry.revokedDevices.map(\.device))")
            guard let publicKey = IdentityKey(Array(identity.publicKey.rawRepresentation)) else { throw ConformanceFailure("no identity key") }
            for certificate in entry.revokedDevices {
                let checked = UnverifiedDeviceCertificate(user: user, device: certificate.device, deviceKey: Array(certificate.deviceKey),
                                                          signature: Array(certificate.signature))
                try expect((try? checked.verified(by: publicKey)) != nil, "a revoked certificate as published: \(certificate.device)")
            }
            let replaced = try peer.request(8, .publishIdentity(.with {
                $0.identityKey = Curve25519.Signing.PrivateKey().publicKey.rawRepresentation
                $0.replace = true
            }))
            guard case .ok? = replaced?.body else { throw ConformanceFailure("publishIdentity: \(describe(replaced))") }
            let after = try peer.request(9, .keyDirectory(.with { $0.user = user }))
            guard case .keyDirectoryEntry(let ended)? = after?.body else { throw ConformanceFailure("keyDirectory: \(describe(after))") }
            try expect(ended.devices.isEmpty && ended.revokedDevices.isEmpty, "after a new identity: \(ended.revokedDevices.map(\.device))")
        },
        ConformanceCheck("4.34", "4. Messages, Keys", "a contact bound over UDP is told with a KEYS datagram naming the user when a device of the user gets its first KeyPackages, and again when a device of the user is revoked") { target in
            let (watcher, watcherName) = try target.boundPeer("b")
            let (user, peer, identity) = try keyOwner(target)
            try strangers(peer, user, watcher, watcherName)
            _ = try peer.request(40, .contactRequest(.with { $0.action = .add; $0.user = watcherName }))
            let accepted = try watcher.request(41, .contactRequest(.with { $0.action = .accept; $0.user = user }))
            guard case .contactAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let lastResort = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: deviceKey)
            let stored = try peer.request(4, .uploadKeyPackages(.with { $0.lastResort = Data(lastResort) }))
            guard case .keyPackagesStored? = stored?.body else { throw ConformanceFailure("upload: \(describe(stored))") }
            let told = try watcher.datagram(of: .keys)
            try expect(told == Array(user.utf8), "after the device's first KeyPackage: \(told.map { String(decoding: $0, as: UTF8.self) } ?? "no KEYS datagram")")
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 5, device: "tablet")
            let revoked = try peer.request(6, .revokeDevice(.with { $0.name = "tablet" }))
            guard case .ok? = revoked?.body else { throw ConformanceFailure("revokeDevice: \(describe(revoked))") }
            let again = try watcher.datagram(of: .keys)
            try expect(again == Array(user.utf8), "after a revocation: \(again.map { String(decoding: $0, as: UTF8.self) } ?? "no KEYS datagram")")
        },
        ConformanceCheck("4.35", "4. Messages, Keys", "a contact with no session when a device of the user gets its first KeyPackages is pushed a KEYS_CHANGED notice from the user once it connects") { target in
            let (awayName, awayPassword) = try target.newUser("k")
            let away = try target.peer()
            _ = try away.login(awayName, awayPassword)
            let (user, peer, identity) = try keyOwner(target)
            _ = try peer.request(40, .contactRequest(.with { $0.action = .add; $0.user = awayName }))
            let accepted = try away.request(41, .contactRequest(.with { $0.action = .accept; $0.user = user }))
            guard case .contactAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            away.closeControl()
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let lastResort = try HandMadeKeyPackage.make(identity: "\(user)/default", signer: deviceKey)
            let stored = try peer.request(4, .uploadKeyPackages(.with { $0.lastResort = Data(lastResort) }))
            guard case .keyPackagesStored? = stored?.body else { throw ConformanceFailure("upload: \(describe(stored))") }

            let back = try target.peer()
            try back.connectAndBind(token: try back.login(awayName, awayPassword))
            var notice: Simp_Message?
            while notice == nil, let push = try back.nextPush() { if push.type == .keysChanged { notice = push } }
            try expect(notice?.fromUser == user && notice?.content == "", "the KEYS_CHANGED notice: \(String(describing: notice))")
        },
    ]

    /// Account "a" logged in (device "default") with a new identity key published (`replace`).
    static func keyOwner(_ target: ConformanceTarget) throws -> (String, RawPeer, Curve25519.Signing.PrivateKey) {
        let (user, password) = try target.account("a")
        let peer = try target.peer()
        _ = try peer.login(user, password)
        let identity = Curve25519.Signing.PrivateKey()
        let reply = try peer.request(2, .publishIdentity(.with { $0.identityKey = identity.publicKey.rawRepresentation; $0.replace = true }))
        guard case .ok? = reply?.body else { throw ConformanceFailure("publishIdentity: \(describe(reply))") }
        return (user, peer, identity)
    }

    static func certify(_ peer: RawPeer, user: String, identity: Curve25519.Signing.PrivateKey,
                        deviceKey: Curve25519.Signing.PrivateKey, id: UInt64, device: String = "default") throws {
        let certificate = try DeviceCertificate.sign(user: user, device: device, deviceKey: Array(deviceKey.publicKey.rawRepresentation),
                                                     identity: identity)
        let reply = try peer.request(id, .publishDevice(.with { $0.certificate = certificate }))
        guard case .ok? = reply?.body else { throw ConformanceFailure("publishDevice: \(describe(reply))") }
    }
}

/// A KeyPackage built from RFC 9420's structures by hand, apart from SIMP's own MLS code: an
/// `MLSMessage` (section 6) of wire format `mls_key_package` (5), suite 1, a basic credential,
/// a leaf node of source `key_package` (section 7.2) with an unbounded lifetime, and both
/// signatures by `SignWithLabel` (section 5.1.2).
enum HandMadeKeyPackage {
    static func make(identity: String, signer: Curve25519.Signing.PrivateKey) throws -> [UInt8] {
        let initKey = Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation)
        let encryptionKey = Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation)
        // versions, cipher_suites, extensions, proposals, credentials
        let capabilities = opaque(u16(1)) + opaque(u16(1) + u16(3)) + opaque([]) + opaque([]) + opaque(u16(1))
        let leafTBS = opaque(encryptionKey) + opaque(Array(signer.publicKey.rawRepresentation)) + u16(1) + opaque(Array(identity.utf8))
            + capabilities + [1] + u64(0) + u64(UInt64.max) + opaque([])
        let leaf = leafTBS + opaque(try signWithLabel(signer, "LeafNodeTBS", leafTBS))
        let packageTBS = u16(1) + u16(1) + opaque(initKey) + leaf + opaque([])
        return u16(1) + u16(5) + packageTBS + opaque(try signWithLabel(signer, "KeyPackageTBS", packageTBS))
    }

    static func signWithLabel(_ key: Curve25519.Signing.PrivateKey, _ label: String, _ content: [UInt8]) throws -> [UInt8] {
        Array(try key.signature(for: opaque(Array("MLS 1.0 \(label)".utf8)) + opaque(content)))
    }

    /// `opaque<V>` (section 2.1.2), up to 16,383 bytes.
    static func opaque(_ bytes: [UInt8]) -> [UInt8] {
        (bytes.count < 64 ? [UInt8(bytes.count)] : [UInt8(0x40 | (bytes.count >> 8)), UInt8(bytes.count & 0xff)]) + bytes
    }

    static func u16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }
    static func u64(_ value: UInt64) -> [UInt8] { (0..<8).reversed().map { UInt8((value >> (8 * UInt64($0))) & 0xff) } }
}
