import Crypto
import Foundation
import SIMPCore

/// Where this device's identity stands (`SIMPClient.setUpIdentity`).
public enum IdentityState: Sendable, Equatable {
    /// This device made the user's identity (the first device) and published it with its own
    /// certificate.
    case created
    /// This device holds the user's identity, published.
    case ready
    /// The user has an identity this device does not hold: another device made it. This one
    /// must be linked from a device the user has (docs/E2EE.md, "Devices").
    case needsLinking
}

/// The safety number of the user and a peer (`SIMPClient.safetyNumber(with:)`).
public struct SafetyCheck: Sendable, Equatable {
    public var user: String
    /// 60 digits in 12 groups of 5, the same on both sides.
    public var number: String
    /// The user marked this peer's current identity key verified (`markVerified`).
    public var verified: Bool
    /// The peer's identity key is not the one this device saw before.
    public var identityChanged: Bool
}

/// What `setUpIdentity` does next, from what the store and the server hold. Pure.
enum IdentitySetup: Equatable {
    case create
    /// Publish the stored keys (the server does not have them yet, or has them already: idempotent).
    case publish
    case ready
    case needsLinking

    static func next(stored: (identityPublic: [UInt8], published: Bool)?, onServer: [UInt8]?, newIdentity: Bool) -> IdentitySetup {
        if newIdentity { return .create }
        guard let stored else { return onServer == nil ? .create : .needsLinking }
        if onServer == stored.identityPublic { return stored.published ? .ready : .publish }
        // The server has none (a new server, or it was dropped) or another one: this device's
        // identity is the user's, since only the user's devices hold it.
        return onServer == nil ? .publish : .needsLinking
    }
}

/// Whether a device may take the identity a device beside it on this machine holds
/// (`linkThisDevice(fromDataDirectory:)`). Pure.
enum SiblingIdentity {
    /// `held`: the public key of the identity this device holds, if any; `onServer`: the one the
    /// server gives; `sibling`: the one the device beside it holds and the one that replaced, if
    /// it made a new identity over one. A device with no identity takes the sibling's when the
    /// server names it. A device holding one takes another only when the sibling made it over
    /// exactly the one it holds: the server's word alone (it may answer an older identity, one a
    /// stale directory beside it still holds) never makes a device give up its own.
    static func mayTake(held: [UInt8]?, onServer: [UInt8]?, sibling: (identity: [UInt8], replaced: [UInt8]?)) -> Bool {
        guard let onServer, sibling.identity == onServer else { return false }
        guard let held else { return true }
        return held != onServer && sibling.replaced == held
    }
}

/// The user's identity key and this device's certificate, made and kept in the data directory
/// (docs/E2EE.md, Part 2); safety numbers and verification (docs/E2EE.md, "Verification").
extension SIMPClient {
    /// Makes the user's identity on its first device, or checks this device's: needs a
    /// connection and a `dataDirectory` (the private keys live there, readable by the user
    /// alone). With `newIdentity` (every device was lost), a new identity replaces the
    /// server's: every device certificate and KeyPackage of the user goes, and peers are told
    /// of the change when they next look (`identityChanged`).
    @discardableResult
    ///
    /// A device that holds the identity also uploads its KeyPackages (when it has few left), so
    /// that peers can start encrypted conversations with it (docs/E2EE.md, Part 4).
    public func setUpIdentity(newIdentity: Bool = false) async throws(ClientError) -> IdentityState {
        let state = try await identityState(newIdentity: newIdentity)
        if state != .needsLinking {
            try await conversationKeys().refillKeyPackages(self)
        }
        return state
    }

    private func identityState(newIdentity: Bool) async throws(ClientError) -> IdentityState {
        let store = try await identityStore()
        let user = store.user
        let device = try await currentDevice()
        let stored: ClientStore.OwnKeys?
        do { stored = try store.ownKeys() } catch { throw ClientError("cannot read the identity in \(store.path): \(error)") }
        let onServer = try await keyDirectoryIfAny(of: user)
        let storedPublic = stored.flatMap { try? Curve25519.Signing.PrivateKey(rawRepresentation: $0.identityKey) }.map { Array($0.publicKey.rawRepresentation) }
        switch IdentitySetup.next(stored: storedPublic.map { ($0, stored!.published) }, onServer: onServer?.identityKey, newIdentity: newIdentity) {
        case .ready:
            return .ready
        case .needsLinking:
            return .needsLinking
        case .create:
            let keys = ClientStore.OwnKeys(identityKey: Array(Curve25519.Signing.PrivateKey().rawRepresentation),
                                           deviceKey: Array(Curve25519.Signing.PrivateKey().rawRepresentation), published: false)
            try saveKeys(keys, in: store)
            try await publish(keys, user: user, device: device, replace: newIdentity || onServer != nil, store: store)
            return .created
        case .publish:
            try await publish(stored!, user: user, device: device, replace: false, store: store)
            return .ready
        }
    }

    /// Links this device from another device's data directory on this machine (`DIR/USER.sqlite`
    /// of `directory`), without a code: the identity's private key is read from that file and
    /// kept here with a new device key, then this device's certificate is published as after a
    /// link (docs/E2EE.md, Part 5). No key crosses the network, and whoever can read that file
    /// holds the identity already. For `simp`'s devices of one installation (the REPL's and the
    /// one-shot commands'). Returns what `setUpIdentity` returns once the key is kept;
    /// `.needsLinking` (nothing kept) when that directory holds no identity of the user, or
    /// another than the server's. A device that holds the identity already just sets it up; one
    /// that holds an identity the other device replaced by a new one (recorded there) takes the
    /// new one, with a new device key (its conversations start afresh, `saveKeys`):
    /// `SiblingIdentity.mayTake`.
    public func linkThisDevice(fromDataDirectory directory: String) async throws(ClientError) -> IdentityState {
        let store = try await identityStore()
        let held = (try? store.ownKeys()).flatMap { try? Curve25519.Signing.PrivateKey(rawRepresentation: $0.identityKey) }
            .map { Array($0.publicKey.rawRepresentation) }
        let onServer = try await keyDirectoryIfAny(of: store.user)?.identityKey
        if held != nil, held == onServer || onServer == nil { return try await setUpIdentity() }
        let path = (directory as NSString).appendingPathComponent("\(store.user).sqlite")
        guard let (identityKey, replaced) = ClientStore.identityKey(inFileAt: path, user: store.user),
              let identity = try? Curve25519.Signing.PrivateKey(rawRepresentation: identityKey) else { return .needsLinking }
        // A stale directory (the identity was replaced since) must not make this device another
        // one's, nor the server's word alone make it give up its own.
        guard SiblingIdentity.mayTake(held: held, onServer: onServer, sibling: (Array(identity.publicKey.rawRepresentation), replaced)) else {
            return .needsLinking
        }
        try saveKeys(ClientStore.OwnKeys(identityKey: identityKey, deviceKey: Array(Curve25519.Signing.PrivateKey().rawRepresentation),
                                         published: false), in: store)
        return try await setUpIdentity()
    }

    /// The safety number of the user and `peer`, from both identity keys as the server gives
    /// them; the user's own key must be this device's (`setUpIdentity`). The peer's key is
    /// recorded the first time; a different one later is reported (`identityChanged`, and the
    /// event of that name) and is no longer verified.
    public func safetyNumber(with peer: String) async throws(ClientError) -> SafetyCheck {
        let pinned = try await pinIdentity(of: peer)
        let number = SafetyNumber((pinned.user, pinned.own), (peer, pinned.peer))
        var check = SafetyCheck(user: peer, number: number.description, verified: false, identityChanged: false)
        switch pinned.record {
        case .new: break
        case .same(let verified): check.verified = verified
        case .changed: check.identityChanged = true
        }
        return check
    }

    /// Records `peer`'s identity key as the server gives it the first time, and reports a
    /// different one later (the `identityChanged` event; no longer verified). Without the safety
    /// number: a conversation's member checks pin every peer (`ConversationKeys`), and the
    /// number's 5,200 hash iterations a side were 4% of an encrypted message's cost.
    /// `entry`: the directory's answer the key was pinned from (its devices are certified under it).
    func pinIdentity(of peer: String) async throws(ClientError) -> (user: String, own: IdentityKey, peer: IdentityKey,
                                                                     record: ClientStore.PeerRecord, entry: KeyDirectoryEntry) {
        let store = try await identityStore()
        guard let own = try? store.ownKeys(), let identity = try? Curve25519.Signing.PrivateKey(rawRepresentation: own.identityKey) else {
            throw ClientError("this device has no identity yet: setUpIdentity() first")
        }
        guard let entry = try await publishedEntry(of: peer), let peerKey = IdentityKey(entry.identityKey),
              let ownKey = IdentityKey(Array(identity.publicKey.rawRepresentation)) else {
            throw ClientError("\(peer) has published no identity key yet", code: .noIdentity)
        }
        // Another user's entry is never recorded as `peer`'s key: that would pin a key the
        // caller then refuses, and report `peer`'s real one as a change at the next answer.
        guard entry.user == peer else {
            throw ClientError("the server answered \(entry.user)'s key directory for \(peer)", code: .endToEnd)
        }
        let record: ClientStore.PeerRecord
        do {
            record = try store.record(peer: peer, identityKey: entry.identityKey, nowMillis: Date().millis)
        } catch {
            throw ClientError("cannot record \(peer)'s identity in \(store.path): \(error)")
        }
        if case .changed = record { loop.execute { [self] in deliver(.identityChanged(user: peer)) } }
        return (store.user, ownKey, peerKey, record, entry)
    }

    /// Marks `peer`'s identity verified: `number` is the safety number the two users compared
    /// (spaces ignored). Throws if it is not the current one, or the key changed meanwhile.
    public func markVerified(_ peer: String, number: String) async throws(ClientError) {
        let check = try await safetyNumber(with: peer)
        let typed = number.filter { !$0.isWhitespace }
        guard !check.identityChanged, check.number.filter(\.isNumber) == typed else {
            throw ClientError("that is not the safety number with \(peer) now: compare again (/verify \(peer))")
        }
        let store = try await identityStore()
        guard let entry = try await keyDirectoryIfAny(of: peer),
              (try? store.verify(peer: peer, identityKey: entry.identityKey)) == true else {
            throw ClientError("\(peer)'s identity changed while verifying: compare again (/verify \(peer))")
        }
    }

    // MARK: parts

    func identityStore() async throws(ClientError) -> ClientStore {
        guard configuration.dataDirectory != nil else {
            throw ClientError("an identity needs a data directory (--data-dir): its private key is kept there")
        }
        guard let store = try? await loop.submit({ [self] in self.store }).get() else {
            throw ClientError("not connected: the identity is set up once connected", code: .notConnected)
        }
        return store
    }

    func currentDevice() async throws(ClientError) -> String {
        guard let device = try? await loop.submit({ [self] in engine.device }).get() else { throw ClientError("the client is closed") }
        return device
    }

    /// `user`'s entry, nil when the user exists but published no identity key; a user who does
    /// not exist is an error of its own (`.unknownUser`, "no such user"), not a user without keys.
    private func publishedEntry(of user: String) async throws(ClientError) -> KeyDirectoryEntry? {
        do {
            let entry = try await keyDirectory(of: user)
            return entry.identityKey.isEmpty ? nil : entry
        } catch where error.code == .noIdentity {
            return nil
        } catch where error.code == .unknownUser {
            throw ClientError("no such user: \(user)", code: .unknownUser)
        }
    }

    private func keyDirectoryIfAny(of user: String) async throws(ClientError) -> KeyDirectoryEntry? {
        do {
            let entry = try await keyDirectory(of: user)
            return entry.identityKey.isEmpty ? nil : entry
        } catch where error.code == .unknownUser || error.code == .noIdentity {
            return nil
        }
    }

    /// Keeps `keys`; a new device key also ends the conversations' keys made under the old one
    /// (`ClientStore.save`), on disk and in memory: the next use makes them afresh.
    func saveKeys(_ keys: ClientStore.OwnKeys, in store: ClientStore) throws(ClientError) {
        do { try store.save(keys) } catch { throw ClientError("cannot keep the identity in \(store.path): \(error)") }
        keyring.withLock { kept in if let made = kept, made.generation != store.keysGeneration.value { kept = nil } }
    }

    /// Publishes the identity key and this device's certificate, then records that it did.
    private func publish(_ keys: ClientStore.OwnKeys, user: String, device: String, replace: Bool, store: ClientStore) async throws(ClientError) {
        guard let identity = try? Curve25519.Signing.PrivateKey(rawRepresentation: keys.identityKey),
              let deviceKey = try? Curve25519.Signing.PrivateKey(rawRepresentation: keys.deviceKey) else {
            throw ClientError("the identity kept in \(store.path) is damaged")
        }
        try await publishIdentity(Array(identity.publicKey.rawRepresentation), replace: replace)
        let certificate: CertifiedDevice
        do {
            certificate = try CertifiedDevice.sign(user: user, device: device, deviceKey: Array(deviceKey.publicKey.rawRepresentation), identity: identity)
        } catch {
            throw ClientError("cannot sign this device's certificate: \(error)")
        }
        try await publishDevice(certificate)
        var published = keys
        published.published = true
        try saveKeys(published, in: store)
    }
}
