import SIMPCore
import SIMPMLS

/// Section 5.3.1 for SIMP: a member's basic credential is "USER/DEVICE" and its signature key
/// the device key that USER's identity certified, as the key directory gave them (each
/// certificate checked under the identity key; the identity itself pinned or verified).
struct DirectoryValidator: CredentialValidator {
    /// Credential identity -> certified device key.
    let keys: [[UInt8]: [UInt8]]
    /// The users whose devices these are (this user first), in the order KeyPackages are claimed.
    var owners: [String] = []
    /// Certified devices of users who are not members now but whose leaves a Welcome's tree or a
    /// past commit holds (a member since removed): checked as members' are, never claimed,
    /// never kept in a member check (`keys` alone says who belongs).
    private(set) var formerKeys: [[UInt8]: [UInt8]] = [:]
    private(set) var formerOwners: Set<String> = []
    /// Keys of devices certified once and no longer: those the directory lists as revoked (or
    /// replaced under their name by another key), each verified under its user's identity, and
    /// those this device itself saw certified (`admitSeen`, kept across a new identity of their
    /// user, which ends the directory's list). A leaf under one passes the check, since a commit
    /// made while the device was certified may hold it (a device that was away catches up
    /// through it), but it is never claimed, and a member check removes it (`keys` alone says
    /// who belongs).
    private(set) var pastKeys: [[UInt8]: Set<[UInt8]>] = [:]
    /// Whether a leaf of a user who is not a member may be checked against that user's
    /// directory (`NotKnown`): in a group, whose members come and go; never in a one-to-one
    /// conversation, whose only users are its two.
    var admitsFormerMembers = false
    /// The former members one validator reads at most: a Welcome or a commit naming more users
    /// is refused rather than having the device fetch a directory entry for each.
    static let maxFormerMembers = 64

    struct Uncertified: Error, CustomStringConvertible {
        var description: String { "a member's device is not certified by its user's identity" }
    }

    /// A leaf of a user this validator has not read the directory of: read it (`including`)
    /// and check again.
    struct NotKnown: Error, CustomStringConvertible {
        let user: String
        var description: String { "a leaf of \(user), whose devices were not read" }
    }

    func validate(_ credential: Credential, signatureKey: SignaturePublicKey) throws {
        guard case .basic(let identity) = credential else { throw Uncertified() }
        let key = signatureKey.rawRepresentation
        if pastKeys[identity]?.contains(key) == true { return }
        if let certified = keys[identity] ?? formerKeys[identity] {
            guard certified == key else { throw Uncertified() }
            return
        }
        if admitsFormerMembers, formerOwners.count < Self.maxFormerMembers,
           let user = KeyDirectoryRules.user(ofCredentialIdentity: identity), !owners.contains(user), !formerOwners.contains(user) {
            throw NotKnown(user: user)
        }
        throw Uncertified()
    }

    /// With `user`'s certified and revoked devices, for checking only.
    func including(_ user: String, devices: [VerifiedDevice], revoked: [VerifiedDevice] = []) -> DirectoryValidator {
        var extended = self
        extended.formerOwners.insert(user)
        for device in devices { extended.formerKeys[KeyDirectoryRules.credentialIdentity(user: user, device: device.device)] = device.deviceKey }
        extended.admitRevoked(revoked)
        return extended
    }

    /// With devices whose certificates were revoked (`pastKeys`), for checking only.
    mutating func admitRevoked(_ devices: [VerifiedDevice]) {
        for device in devices {
            pastKeys[KeyDirectoryRules.credentialIdentity(user: device.user, device: device.device), default: []].insert(device.deviceKey)
        }
    }

    /// With devices this device itself saw certified while they were (`ClientStore.seenDevices`),
    /// for checking only (`pastKeys`).
    mutating func admitSeen(_ devices: [ClientStore.SeenDevice]) {
        for device in devices { pastKeys[device.identity, default: []].insert(device.key) }
    }
}
