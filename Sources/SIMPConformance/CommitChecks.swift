import Crypto
import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// The commit order (section 4, Commits), in the one-to-one conversation of the two
    /// accounts: each check starts at the conversation's current epoch, and frames its commits
    /// for the conversation's MLS group (the one its last commit is framed for), so runs can
    /// repeat against one server. The server reads a commit's framing but cannot verify a
    /// commit: made-up ones (`MLSFraming`, from RFC 9420's structs) do.
    static let commits: [ConformanceCheck] = [
        ConformanceCheck("4.17", "4. Messages, Commits", "the first commit for an epoch is stored and the next epoch given; a second for it is COMMIT_CONFLICT and stores nothing; the other user fetches the commits in order") { target in
            let (user, peer, identity) = try keyOwner(target)
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 3)
            let (other, otherPassword) = try target.account("b")
            let (epoch, group) = try currentEpoch(peer, other, id: 4)
            let (first, second) = (MLSFraming.commit(group: group, epoch: epoch), MLSFraming.commit(group: group, epoch: epoch))
            try expect(try submit(peer, 5, to: other, epoch: epoch, first) == epoch + 1, "the first commit was not stored at \(epoch)")
            let lost = try peer.request(6, .submitCommit(.with { $0.conversation = other; $0.epoch = epoch; $0.commit = Data(second) }))
            try expect(errorCode(lost) == .commitConflict, "a second commit for epoch \(epoch) got \(describe(lost))")
            let again = MLSFraming.commit(group: group, epoch: epoch + 1)
            try expect(try submit(peer, 7, to: other, epoch: epoch + 1, again) == epoch + 2, "the commit made again on the next epoch was not stored")

            let reader = try target.peer()
            _ = try reader.login(other, otherPassword)
            let reply = try reader.request(2, .fetchCommits(.with { $0.conversation = user; $0.fromEpoch = epoch }))
            guard case .commitPage(let page)? = reply?.body else { throw ConformanceFailure("fetchCommits: \(describe(reply))") }
            try expect(page.epoch == epoch + 2, "the conversation is at \(page.epoch), not \(epoch + 2)")
            try expect(page.commits.map(\.epoch) == [epoch, epoch + 1] && page.commits.map(\.commit) == [Data(first), Data(again)],
                       "the commits fetched from \(epoch): epochs \(page.commits.map(\.epoch))")
            try expect(page.commits.allSatisfy { $0.fromUser == user }, "a commit's fromUser is not its submitter")
        },
        ConformanceCheck("4.18", "4. Messages, Commits", "a Welcome is handed out with its commit only: the losing commit's never; an uncertified device's commit is DEVICE_NOT_CERTIFIED, a non-member's NOT_A_MEMBER") { target in
            let (user, peer, identity) = try keyOwner(target)
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 3)
            let (other, otherPassword) = try target.account("b")
            let (epoch, group) = try currentEpoch(peer, other, id: 4)
            // A Welcome goes to a certified device: the other account certifies a device "joined"
            // (its login device, "default", stays uncertified).
            let joiner = try target.peer()
            _ = try joiner.login(other, otherPassword)
            let otherIdentity = Curve25519.Signing.PrivateKey()
            let published = try joiner.request(5, .publishIdentity(.with { $0.identityKey = otherIdentity.publicKey.rawRepresentation; $0.replace = true }))
            guard case .ok? = published?.body else { throw ConformanceFailure("publishIdentity: \(describe(published))") }
            let certificate = try DeviceCertificate.sign(user: other, device: "joined", deviceKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation),
                                                         identity: otherIdentity)
            let certified = try joiner.request(6, .publishDevice(.with { $0.certificate = certificate }))
            guard case .ok? = certified?.body else { throw ConformanceFailure("publishDevice: \(describe(certified))") }
            let (won, lost) = (MLSFraming.commit(group: group, epoch: epoch), MLSFraming.commit(group: group, epoch: epoch))
            let (winning, losing) = (MLSFraming.welcome(), MLSFraming.welcome())
            let stored = try peer.request(5, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(won); $0.welcome = Data(winning); $0.added = [added(other, "joined")]
            }))
            guard case .commitStored? = stored?.body else { throw ConformanceFailure("submitCommit: \(describe(stored))") }
            let refused = try peer.request(6, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(lost); $0.welcome = Data(losing); $0.added = [added(other, "joined")]
            }))
            try expect(errorCode(refused) == .commitConflict, "the losing commit got \(describe(refused))")

            let joined = try target.peer()
            _ = try joined.login(other, otherPassword, device: "joined")
            let reply = try joined.request(2, .fetchCommits(.with { $0.conversation = user; $0.fromEpoch = epoch; $0.join = true }))
            guard case .commitPage(let page)? = reply?.body else { throw ConformanceFailure("fetchCommits: \(describe(reply))") }
            try expect(page.hasWelcome && page.welcome.welcome == Data(winning) && page.welcome.epoch == epoch + 1,
                       "the Welcome handed out is not the winning commit's, into epoch \(epoch + 1)")
            // The other account's device has no certificate (nothing here publishes one for it).
            let next = MLSFraming.commit(group: group, epoch: epoch + 1)
            let uncertified = try joiner.request(3, .submitCommit(.with { $0.conversation = user; $0.epoch = epoch + 1; $0.commit = Data(next) }))
            try expect(errorCode(uncertified) == .deviceNotCertified, "an uncertified device's commit got \(describe(uncertified))")

            // A group of the first account alone: the other is no member.
            let groupName = "c" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try peer.request(8, .groupRequest(.with { $0.action = .create; $0.group = groupName }))
            guard case .groupAnswer? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            let stranger = try joiner.request(4, .fetchCommits(.with { $0.conversation = "#" + groupName; $0.fromEpoch = 0 }))
            try expect(errorCode(stranger) == .notAMember, "a non-member's fetch got \(describe(stranger))")
            let groupCommit = MLSFraming.commit(group: MLSFraming.groupID(), epoch: 0)
            let member = try peer.request(9, .submitCommit(.with { $0.conversation = "#" + groupName; $0.epoch = 0; $0.commit = Data(groupCommit) }))
            try expect({ if case .commitStored? = member?.body { true } else { false } }(), "the member's commit got \(describe(member))")
            _ = try peer.request(10, .groupRequest(.with { $0.action = .leave; $0.group = groupName }))
        },
        ConformanceCheck("4.26", "4. Messages, Commits", "a commit framed on another epoch than it is submitted for, for another MLS group than the conversation's, no MLSMessage, or with a Welcome that does not decode or does not hold one secret per added device is INVALID_COMMIT and stores nothing; the next valid commit is stored") { target in
            let (user, peer, identity) = try keyOwner(target)
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 3)
            let (other, _) = try target.account("b")
            var (epoch, group) = try currentEpoch(peer, other, id: 4)
            if epoch == 0 {   // the conversation's group is recorded with its first commit
                epoch = try submit(peer, 5, to: other, epoch: 0, MLSFraming.commit(group: group, epoch: 0))
            }
            let refusals: [(String, [UInt8], [UInt8])] = [
                ("framed on the next epoch", MLSFraming.commit(group: group, epoch: epoch + 1), []),
                ("framed on the epoch before", MLSFraming.commit(group: group, epoch: epoch - 1), []),
                ("framed for another group", MLSFraming.commit(group: MLSFraming.groupID(), epoch: epoch), []),
                ("no MLSMessage", (0..<64).map { _ in UInt8.random(in: 0...255) }, []),
                ("a Welcome as the commit", MLSFraming.welcome(), []),
                ("with a Welcome that does not decode", MLSFraming.commit(group: group, epoch: epoch), [0, 1, 0, 3, 0xff]),
                // RFC 9420 section 12.4.3.1: one EncryptedGroupSecrets per new member.
                ("with a Welcome holding no secrets for the device it adds", MLSFraming.commit(group: group, epoch: epoch), MLSFraming.welcome(secrets: 0)),
            ]
            for (index, (what, commit, welcome)) in refusals.enumerated() {
                let reply = try peer.request(6 + UInt64(index), .submitCommit(.with {
                    $0.conversation = other; $0.epoch = epoch; $0.commit = Data(commit)
                    if !welcome.isEmpty {
                        $0.welcome = Data(welcome)
                        $0.added = [added(other, "default")]
                    }
                }))
                try expect(errorCode(reply) == .invalidCommit, "a commit \(what) got \(describe(reply))")
            }
            let (now, _) = try currentEpoch(peer, other, id: 20)
            try expect(now == epoch, "a refused commit moved the conversation from epoch \(epoch) to \(now)")
            let valid = MLSFraming.commit(group: group, epoch: epoch)
            try expect(try submit(peer, 21, to: other, epoch: epoch, valid) == epoch + 1, "the valid commit on \(epoch) was not stored")
        },
        ConformanceCheck("4.28", "4. Messages, Commits", "a commit's one Welcome, sent once with the two devices it adds, is handed to each of them; a Welcome without the devices it adds is BAD_REQUEST") { target in
            let (user, peer, identity) = try keyOwner(target)
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 3)
            let (other, otherPassword) = try target.account("b")
            let (epoch, group) = try currentEpoch(peer, other, id: 4)
            // Two certified devices of the other account, "one" and "two".
            let owner = try target.peer()
            _ = try owner.login(other, otherPassword)
            let otherIdentity = Curve25519.Signing.PrivateKey()
            let published = try owner.request(5, .publishIdentity(.with { $0.identityKey = otherIdentity.publicKey.rawRepresentation; $0.replace = true }))
            guard case .ok? = published?.body else { throw ConformanceFailure("publishIdentity: \(describe(published))") }
            for (index, device) in ["one", "two"].enumerated() {
                let certificate = try DeviceCertificate.sign(user: other, device: device, deviceKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation),
                                                             identity: otherIdentity)
                let certified = try owner.request(6 + UInt64(index), .publishDevice(.with { $0.certificate = certificate }))
                guard case .ok? = certified?.body else { throw ConformanceFailure("publishDevice \(device): \(describe(certified))") }
            }
            let welcome = MLSFraming.welcome(secrets: 2)   // one per device it adds (RFC 9420 section 12.4.3.1)
            let alone = try peer.request(5, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(MLSFraming.commit(group: group, epoch: epoch)); $0.welcome = Data(welcome)
            }))
            try expect(errorCode(alone) == .badRequest, "a Welcome without the devices it adds got \(describe(alone))")
            let stored = try peer.request(6, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(MLSFraming.commit(group: group, epoch: epoch))
                $0.welcome = Data(welcome); $0.added = [added(other, "one"), added(other, "two")]
            }))
            guard case .commitStored? = stored?.body else { throw ConformanceFailure("submitCommit: \(describe(stored))") }
            for device in ["one", "two"] {
                let joined = try target.peer()
                _ = try joined.login(other, otherPassword, device: device)
                let reply = try joined.request(2, .fetchCommits(.with { $0.conversation = user; $0.fromEpoch = 0; $0.join = true }))
                guard case .commitPage(let page)? = reply?.body else { throw ConformanceFailure("fetchCommits from \(device): \(describe(reply))") }
                try expect(page.hasWelcome && page.welcome.welcome == Data(welcome) && page.welcome.epoch == epoch + 1 && page.welcome.fromUser == user,
                           "\(device) was not handed the commit's Welcome into epoch \(epoch + 1)")
            }
        },
        ConformanceCheck("4.31", "4. Messages, Commits", "a user removed from a group before his device joined is handed, with join, the Welcome of his addition and no commit; a fetch without join, or by a device with no Welcome, is NOT_A_MEMBER") { target in
            let (user, peer, identity) = try keyOwner(target)
            try certify(peer, user: user, identity: identity, deviceKey: Curve25519.Signing.PrivateKey(), id: 3)
            let (other, otherPassword) = try target.account("b")
            let owner = try target.peer()
            _ = try owner.login(other, otherPassword)
            // A block of the first account's (4.30 leaves one) undone: an error when there is none is no matter.
            _ = try owner.request(4, .contactRequest(.with { $0.action = .unblock; $0.user = user }))
            let otherIdentity = Curve25519.Signing.PrivateKey()
            let published = try owner.request(5, .publishIdentity(.with { $0.identityKey = otherIdentity.publicKey.rawRepresentation; $0.replace = true }))
            guard case .ok? = published?.body else { throw ConformanceFailure("publishIdentity: \(describe(published))") }
            let certificate = try DeviceCertificate.sign(user: other, device: "former", deviceKey: Array(Curve25519.Signing.PrivateKey().publicKey.rawRepresentation),
                                                         identity: otherIdentity)
            let certified = try owner.request(6, .publishDevice(.with { $0.certificate = certificate }))
            guard case .ok? = certified?.body else { throw ConformanceFailure("publishDevice: \(describe(certified))") }

            let name = "f" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try peer.request(7, .groupRequest(.with { $0.action = .create; $0.group = name; $0.users = [other] }))
            guard case .groupAnswer(let made)? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            if !made.members.contains(where: { $0.name == other }) {
                let accepted = try owner.request(8, .groupRequest(.with { $0.action = .accept; $0.group = name }))
                guard case .groupAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            }
            let group = MLSFraming.groupID()
            let welcome = MLSFraming.welcome()
            let stored = try peer.request(9, .submitCommit(.with {
                $0.conversation = "#" + name; $0.epoch = 0; $0.commit = Data(MLSFraming.commit(group: group, epoch: 0))
                $0.welcome = Data(welcome); $0.added = [added(other, "former")]
            }))
            guard case .commitStored? = stored?.body else { throw ConformanceFailure("submitCommit: \(describe(stored))") }
            let removed = try peer.request(10, .groupRequest(.with { $0.action = .remove; $0.group = name; $0.users = [other] }))
            guard case .groupAnswer? = removed?.body else { throw ConformanceFailure("remove: \(describe(removed))") }
            try expect(try submit(peer, 11, to: "#" + name, epoch: 1, MLSFraming.commit(group: group, epoch: 1)) == 2, "the removal's commit was not stored at 1")

            let former = try target.peer()
            _ = try former.login(other, otherPassword, device: "former")
            let reply = try former.request(2, .fetchCommits(.with { $0.conversation = "#" + name; $0.join = true }))
            guard case .commitPage(let page)? = reply?.body else { throw ConformanceFailure("the former member's join: \(describe(reply))") }
            try expect(page.hasWelcome && page.welcome.welcome == Data(welcome) && page.welcome.epoch == 1,
                       "the former member's device was not handed the Welcome of its addition")
            try expect(page.commits.isEmpty && !page.more, "the former member was handed commits: epochs \(page.commits.map(\.epoch))")
            let fetched = try former.request(3, .fetchCommits(.with { $0.conversation = "#" + name; $0.fromEpoch = 0 }))
            try expect(errorCode(fetched) == .notAMember, "a former member's fetch without join got \(describe(fetched))")
            let noWelcome = try owner.request(12, .fetchCommits(.with { $0.conversation = "#" + name; $0.join = true }))
            try expect(errorCode(noWelcome) == .notAMember, "a former member's device with no Welcome got \(describe(noWelcome))")
        },
        ConformanceCheck("4.33", "4. Messages, Commits", "a commit whose path leaf is the submitting device's under another key than its certificate's is DEVICE_NOT_CERTIFIED; one naming another device, or naming the certified key but signed by another, INVALID_COMMIT; none is stored; under the certified key, signed by it, it is") { target in
            let (user, peer, identity) = try keyOwner(target)
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let (other, _) = try target.account("b")
            let (epoch, group) = try currentEpoch(peer, other, id: 4)
            let mine = Array("\(user)/default".utf8)
            let certified = Array(deviceKey.publicKey.rawRepresentation)
            let rekeyed = MLSFraming.commit(group: group, epoch: epoch, path: .init(identity: mine, signer: Curve25519.Signing.PrivateKey()))
            let refused = try peer.request(5, .submitCommit(.with { $0.conversation = other; $0.epoch = epoch; $0.commit = Data(rekeyed) }))
            try expect(errorCode(refused) == .deviceNotCertified, "a path leaf under another key got \(describe(refused))")
            let elsewhere = MLSFraming.commit(group: group, epoch: epoch, path: .init(identity: Array("\(user)/laptop".utf8), signer: deviceKey))
            let named = try peer.request(6, .submitCommit(.with { $0.conversation = other; $0.epoch = epoch; $0.commit = Data(elsewhere) }))
            try expect(errorCode(named) == .invalidCommit, "a path leaf naming another device got \(describe(named))")
            let forged = MLSFraming.commit(group: group, epoch: epoch,
                                           path: .init(identity: mine, signer: Curve25519.Signing.PrivateKey(), claimedKey: certified))
            let unsigned = try peer.request(7, .submitCommit(.with { $0.conversation = other; $0.epoch = epoch; $0.commit = Data(forged) }))
            try expect(errorCode(unsigned) == .invalidCommit, "a path leaf naming the certified key, signed by another, got \(describe(unsigned))")
            let good = MLSFraming.commit(group: group, epoch: epoch, path: .init(identity: mine, signer: deviceKey))
            try expect(try submit(peer, 8, to: other, epoch: epoch, good) == epoch + 1, "the commit under the certified key was not stored at \(epoch)")
        },
        ConformanceCheck("4.36", "4. Messages, Commits", "a commit's GroupInfo of another epoch than the next is INVALID_COMMIT; one of the next is kept and handed to a fetch with external, the page starting at its epoch; an external commit (new_member_commit) with the certified device's path leaf is stored, and a commit without a GroupInfo leaves none kept; join with external is BAD_REQUEST") { target in
            let (user, peer, identity) = try keyOwner(target)
            let deviceKey = Curve25519.Signing.PrivateKey()
            try certify(peer, user: user, identity: identity, deviceKey: deviceKey, id: 3)
            let (other, otherPassword) = try target.account("b")
            let second = try target.peer()
            _ = try second.login(other, otherPassword, device: "rejoining")
            let (epoch, group) = try currentEpoch(peer, other, id: 4)
            let commit = MLSFraming.commit(group: group, epoch: epoch)
            let stale = try peer.request(5, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(commit)
                $0.groupInfo = Data(MLSFraming.groupInfo(group: group, epoch: epoch))
            }))
            try expect(errorCode(stale) == .invalidCommit, "a GroupInfo of the commit's own epoch got \(describe(stale))")
            let info = MLSFraming.groupInfo(group: group, epoch: epoch + 1)
            let kept = try peer.request(6, .submitCommit(.with {
                $0.conversation = other; $0.epoch = epoch; $0.commit = Data(commit); $0.groupInfo = Data(info)
            }))
            guard case .commitStored(let stored)? = kept?.body, stored.epoch == epoch + 1 else {
                throw ConformanceFailure("a commit with the next epoch's GroupInfo: \(describe(kept))")
            }
            let both = try second.request(7, .fetchCommits(.with { $0.conversation = user; $0.join = true; $0.external = true }))
            try expect(errorCode(both) == .badRequest, "a fetch with join and external got \(describe(both))")
            let fetched = try second.request(8, .fetchCommits(.with { $0.conversation = user; $0.external = true }))
            guard case .commitPage(let page)? = fetched?.body else { throw ConformanceFailure("an external fetch: \(describe(fetched))") }
            try expect(page.hasGroupInfo && page.groupInfo.groupInfo == Data(info) && page.groupInfo.epoch == epoch + 1
                       && page.groupInfo.fromUser == user, "the external fetch was not handed the GroupInfo of epoch \(epoch + 1)")
            try expect(page.commits.isEmpty && page.epoch == epoch + 1, "the external page did not start at the GroupInfo's epoch")
            let external = MLSFraming.commit(group: group, epoch: epoch + 1, path: .init(identity: Array("\(user)/default".utf8), signer: deviceKey),
                                             newMember: true)
            try expect(try submit(peer, 9, to: other, epoch: epoch + 1, external) == epoch + 2, "the external commit was not stored")
            let after = try second.request(10, .fetchCommits(.with { $0.conversation = user; $0.fromEpoch = epoch + 2; $0.external = true }))
            guard case .commitPage(let none)? = after?.body else { throw ConformanceFailure("an external fetch: \(describe(after))") }
            try expect(!none.hasGroupInfo, "a GroupInfo was still kept after a commit without one")
        },
    ]

    /// A device a commit adds.
    private static func added(_ user: String, _ device: String) -> Simp_AddedDevice {
        .with { $0.user = user; $0.device = device }
    }

    /// The one-to-one conversation's epoch now (a page asked from the highest epoch holds none),
    /// and the MLS group id its last commit is framed for (a new one when there is none, or it
    /// is not framed as `MLSFraming` frames it).
    private static func currentEpoch(_ peer: RawPeer, _ other: String, id: UInt64) throws -> (epoch: UInt64, group: [UInt8]) {
        let reply = try peer.request(id, .fetchCommits(.with { $0.conversation = other; $0.fromEpoch = CommitRules.maxEpoch }))
        guard case .commitPage(let page)? = reply?.body else { throw ConformanceFailure("fetchCommits: \(describe(reply))") }
        guard page.epoch > 0 else { return (0, MLSFraming.groupID()) }
        let last = try peer.request(id, .fetchCommits(.with { $0.conversation = other; $0.fromEpoch = page.epoch - 1 }))
        guard case .commitPage(let lastPage)? = last?.body else { throw ConformanceFailure("fetchCommits: \(describe(last))") }
        return (page.epoch, lastPage.commits.last.flatMap { MLSFraming.groupID(ofCommit: Array($0.commit)) } ?? MLSFraming.groupID())
    }

    private static func submit(_ peer: RawPeer, _ id: UInt64, to conversation: String, epoch: UInt64, _ commit: [UInt8]) throws -> UInt64 {
        let reply = try peer.request(id, .submitCommit(.with { $0.conversation = conversation; $0.epoch = epoch; $0.commit = Data(commit) }))
        guard case .commitStored(let stored)? = reply?.body else { throw ConformanceFailure("submitCommit on \(epoch): \(describe(reply))") }
        return stored.epoch
    }
}
