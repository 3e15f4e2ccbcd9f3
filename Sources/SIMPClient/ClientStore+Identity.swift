import Crypto
import Foundation
import GRDB
import SIMPCore

/// The user's identity in the data directory, and what it knows of its peers' identities
/// (docs/E2EE.md, "Identity and devices", "Verification").
extension ClientStore {
    /// This installation's keys: the user's identity key (which signs device certificates)
    /// and this device's own key, both Ed25519 private keys (32 bytes each).
    struct OwnKeys: Sendable, Equatable {
        var identityKey: [UInt8]
        var deviceKey: [UInt8]
        /// The server took the identity key and this device's certificate.
        var published: Bool
    }

    /// The keys, and the generation (`keysGeneration`) they are, read together: a
    /// `ConversationKeys` made from them writes under that generation.
    func ownKeysAndGeneration() throws -> (keys: OwnKeys, generation: Int)? {
        try lookUp { db in try Self.ownKeys(of: user, db).map { ($0, keysGeneration.value) } }
    }

    /// A write of conversations' keys made under `generation` while another is current.
    struct StaleKeys: Error, CustomStringConvertible {
        var description: String { "made under a device key this device no longer holds" }
    }

    /// Throws `StaleKeys` unless `generation` is current; called inside the write it guards, where
    /// `save`'s change cannot come between the check and the write.
    func checkKeys(_ generation: Int) throws {
        guard keysGeneration.value == generation else { throw StaleKeys() }
    }

    /// A state of `conversation` made after an opening that was not kept (`unkeptOpenings`).
    struct OpeningNotKept: Error, CustomStringConvertible {
        var conversation: String
        var description: String { "a message of \(conversation) opened before this state was not kept: the state waits for it" }
    }

    /// Refuses a state of `conversation` while an opening of it is not kept.
    func checkOpeningsKept(_ conversation: String) throws {
        guard !unkeptOpenings.value.contains(conversation) else { throw OpeningNotKept(conversation: conversation) }
    }

    func ownKeys() throws -> OwnKeys? {
        try lookUp { db in try Self.ownKeys(of: user, db) }
    }

    private static func ownKeys(of user: String, _ db: Database) throws -> OwnKeys? {
        try Row.fetchOne(try db.cachedStatement(sql: "SELECT * FROM identity WHERE user = ?"), arguments: [user]).map { row in
            OwnKeys(identityKey: [UInt8](row["identityKey"] as Data), deviceKey: [UInt8](row["deviceKey"] as Data),
                    published: row["published"])
        }
    }

    /// The identity kept for `user` in the file at `path` (another device's data directory on
    /// this machine), read without writing it: its private key, and the public key of the
    /// identity it replaced, if it did (`identity.replaced`); nil when there is none to read.
    static func identityKey(inFileAt path: String, user: String) -> (key: [UInt8], replaced: [UInt8]?)? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        var configuration = Configuration()
        configuration.readonly = true
        // Its device may be writing it: wait for the write, as `init` does.
        configuration.busyMode = .timeout(5)
        guard let db = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        let row = try? db.read { db in
            try Row.fetchOne(db, sql: "SELECT identityKey, replaced FROM identity WHERE user = ?", arguments: [user])
        }
        guard let row = row.flatMap({ $0 }) else { return nil }
        return ([UInt8](row["identityKey"] as Data), (row["replaced"] as Data?).map { [UInt8]($0) })
    }

    /// Keeps `keys`. A device key other than the one kept ends everything made under the old
    /// one, in the same transaction: each conversation's group state (its leaf's signature key
    /// and the private keys of its path; the server refuses its commits once the key is no
    /// longer certified, `DEVICE_NOT_CERTIFIED`), the commits waiting for their fate and the
    /// KeyPackages. The device is then added to its conversations again by a Welcome, as a new
    /// device is (docs/E2EE.md, Part 4, "A new device key in a kept data directory"). What the
    /// history already holds stays. A new identity over one held here records the one it
    /// replaced (`identity.replaced`).
    func save(_ keys: OwnKeys) throws {
        try db.write { db in
            let row = try Row.fetchOne(db, sql: "SELECT identityKey, deviceKey, replaced FROM identity WHERE user = ?", arguments: [user])
            var replaced = (row?["replaced"] as Data?).map { [UInt8]($0) }
            if let row, [UInt8](row["identityKey"] as Data) != keys.identityKey {
                replaced = (try? Curve25519.Signing.PrivateKey(rawRepresentation: row["identityKey"] as Data)).map { Array($0.publicKey.rawRepresentation) }
            }
            if let row, [UInt8](row["deviceKey"] as Data) != keys.deviceKey {
                try db.execute(sql: """
                    DELETE FROM mls_groups; DELETE FROM mls_pending; DELETE FROM key_packages;
                    """)
                // This user's own devices seen under the identity being left go too.
                try db.run(sql: "DELETE FROM seen_devices WHERE user = ?", arguments: [user])
                pendingCommits.withLock { $0 = [:] }
                renewals.withLock { $0 = [:] }
                keysGeneration.withLock { $0 += 1 }
            }
            try db.run(sql: "INSERT OR REPLACE INTO identity (user, identityKey, deviceKey, published, replaced) VALUES (?, ?, ?, ?, ?)",
                           arguments: [user, Data(keys.identityKey), Data(keys.deviceKey), keys.published, replaced.map { Data($0) }])
        }
    }

    /// The offer this device made to link `device`, if any (`SIMPClient.pendingLinks`).
    func linkOffer(to device: String) throws -> OfferedLink? {
        try lookUp { db in
            try Row.fetchOne(try db.cachedStatement(sql: "SELECT request, offer FROM link_offers WHERE device = ?"), arguments: [device]).flatMap { row in
                guard let request = try? DeviceLink.Request(bytes: [UInt8](row["request"] as Data)),
                      let offer = try? DeviceLink.Offer(bytes: [UInt8](row["offer"] as Data)) else { return nil }
                return OfferedLink(user: user, device: device, request: request, offer: offer)
            }
        }
    }

    /// Every offer this device made, by new device.
    func linkOffers() throws -> [String: OfferedLink] {
        try lookUp { db in
            var offers: [String: OfferedLink] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT device, request, offer FROM link_offers") {
                let device: String = row["device"]
                guard let request = try? DeviceLink.Request(bytes: [UInt8](row["request"] as Data)),
                      let offer = try? DeviceLink.Offer(bytes: [UInt8](row["offer"] as Data)) else { continue }
                offers[device] = OfferedLink(user: user, device: device, request: request, offer: offer)
            }
            return offers
        }
    }

    /// Keeps `offered` (replacing an older offer to its device), or with nil drops the offer to `device`.
    func keepLinkOffer(_ offered: OfferedLink?, device: String) throws {
        try db.write { db in
            if let offered {
                try db.run(sql: "INSERT OR REPLACE INTO link_offers (device, request, offer) VALUES (?, ?, ?)",
                               arguments: [device, Data(offered.request.bytes), Data(offered.offer.bytes)])
            } else {
                try db.run(sql: "DELETE FROM link_offers WHERE device = ?", arguments: [device])
            }
        }
    }

    /// What the store knew of a peer's identity key before this look.
    enum PeerRecord: Sendable, Equatable {
        /// Never seen: now recorded.
        case new
        case same(verified: Bool)
        /// Another key than the one recorded (the peer has a new identity): recorded now,
        /// not verified.
        case changed(wasVerified: Bool)
    }

    /// Records `key` as `peer`'s identity key (trust on first use, a change reported).
    func record(peer: String, identityKey key: [UInt8], nowMillis: Int64) throws -> PeerRecord {
        try db.write { db in
            // Forgotten on the writer's queue, where `isHeld` fills it: never refilled with a
            // value read before this write.
            heldPeers.withLock { $0[peer] = nil }
            guard let row = try Row.fetchOne(try db.cachedStatement(sql: "SELECT identityKey, verified FROM peers WHERE user = ?"), arguments: [peer]) else {
                try db.run(sql: "INSERT INTO peers (user, identityKey, verified, seenAt) VALUES (?, ?, 0, ?)",
                               arguments: [peer, Data(key), nowMillis])
                return .new
            }
            let verified: Bool = row["verified"]
            if [UInt8](row["identityKey"] as Data) == key { return .same(verified: verified) }
            // A verified peer's new key holds sending to them until the user verifies again: a
            // hold stays through further changes (a server switching back and forth between keys
            // does not lift it), and only `verify` ends it.
            try db.run(sql: "UPDATE peers SET identityKey = ?, verified = 0, held = MAX(held, ?), seenAt = ? WHERE user = ?",
                           arguments: [Data(key), verified, nowMillis, peer])
            return .changed(wasVerified: verified)
        }
    }

    /// Whether sending to `peer` waits for the user: a verified identity of theirs changed and
    /// was not verified again.
    func isHeld(peer: String) throws -> Bool {
        if let known = heldPeers.value[peer] { return known }
        return try lookUp { db in
            let held = try Bool.fetchOne(try db.cachedStatement(sql: "SELECT held FROM peers WHERE user = ?"), arguments: [peer]) ?? false
            heldPeers.withLock { $0[peer] = held }
            return held
        }
    }

    /// Marks `peer`'s identity verified, if `key` is still the one recorded; returns whether it
    /// was. The devices seen certified under any other identity of the peer's go (`seen_devices`):
    /// the user said which key is the peer's, and one a server showed before is not.
    func verify(peer: String, identityKey key: [UInt8]) throws -> Bool {
        try db.write { db in
            heldPeers.withLock { $0[peer] = nil }
            try db.run(sql: "UPDATE peers SET verified = 1, held = 0 WHERE user = ? AND identityKey = ?", arguments: [peer, Data(key)])
            guard db.changesCount == 1 else { return false }
            try db.run(sql: "DELETE FROM seen_devices WHERE user = ? AND identityKey != ?", arguments: [peer, Data(key)])
            return true
        }
    }
}
