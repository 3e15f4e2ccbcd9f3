import Foundation
import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// The commit order against a real server and redis-server (docs/E2EE.md, Part 3): two devices
/// race for one epoch and exactly one wins, the other is told `COMMIT_CONFLICT` and succeeds on
/// the new epoch; a Welcome of a commit that lost is never handed out; a device catches up
/// through the commits in order; a non-member and an uncertified device are refused; a commit
/// framed for another epoch or another MLS group than the conversation's is refused and stores
/// nothing. Commits and Welcomes are made-up framing (`MLSFraming`): the server cannot verify one.
@Suite(.serialized) struct CommitOrderTests {
    static func random(_ count: Int) -> [UInt8] { KeyFixtures.random(count) }

    /// A commit framed on `epoch` for `group`.
    static func commit(_ epoch: UInt64, _ group: [UInt8]) -> [UInt8] { MLSFraming.commit(group: group, epoch: epoch) }

    /// Publishes `keys`' identity (the same key again changes nothing) and a certificate for `device`.
    func certify(_ client: SIMPClient, _ keys: KeyFixtures, device: String) async throws {
        try await client.publishIdentity(keys.identityKey)
        try await client.publishDevice(try keys.certified(device, try KeyFixtures.deviceSigner()))
    }

    func outcome(_ body: () async throws(ClientError) -> UInt64) async -> Result<UInt64, ClientError> {
        do throws(ClientError) {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }

    /// Both submit on `epoch` at once; returns (the winner's index, the loser's error).
    func race(_ first: SIMPClient, _ firstCommit: [UInt8], _ firstWelcome: CommitWelcome?,
              _ second: SIMPClient, _ secondCommit: [UInt8], _ secondWelcome: CommitWelcome?,
              in conversation: String, epoch: UInt64) async -> (winner: Int, loser: ClientError?) {
        async let a = outcome { () async throws(ClientError) in
            try await first.submitCommit(firstCommit, to: conversation, epoch: epoch, welcome: firstWelcome)
        }
        async let b = outcome { () async throws(ClientError) in
            try await second.submitCommit(secondCommit, to: conversation, epoch: epoch, welcome: secondWelcome)
        }
        let results = await [a, b]
        let wins = results.enumerated().filter { if case .success(let now) = $0.element { now == epoch + 1 } else { false } }
        #expect(wins.count == 1, "exactly one commit wins epoch \(epoch): \(results)")
        let losses = results.compactMap { if case .failure(let error) = $0 { error } else { nil } }
        return (wins.first?.offset ?? -1, losses.first)
    }

    @Test func twoDevicesRaceForAnEpochAndTheLoserCommitsOnTheNextOne() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["bob"])
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (laptop, _) = try await cluster.connectedDevice("alice", "laptop")
        let (desk, _) = try await cluster.connectedDevice("bob", "desk")
        let (tablet, _) = try await cluster.connectedDevice("bob", "tablet")
        let (carol, _) = try await cluster.connectedDevice("carol", "phone")
        let (alice, bob, carolKeys) = (KeyFixtures("alice"), KeyFixtures("bob"), KeyFixtures("carol"))
        _ = try await phone.createGroup("team", members: ["bob"])
        let team = MLSFraming.groupID()
        let first = Self.commit(0, team)

        // An uncertified device may not commit; a certified one of a non-member neither.
        await expectCode(.deviceNotCertified) { try await phone.submitCommit(first, to: "#team", epoch: 0) }
        try await certify(phone, alice, device: "phone")
        try await certify(laptop, alice, device: "laptop")
        try await certify(desk, bob, device: "desk")
        try await certify(carol, carolKeys, device: "phone")
        await expectCode(.notAMember) { try await carol.submitCommit(first, to: "#team", epoch: 0) }
        await expectCode(.notAMember) { try await carol.fetchCommits(in: "#team", fromEpoch: 0) }
        await expectCode(.noSuchGroup) { try await phone.submitCommit(first, to: "#nothing", epoch: 0) }
        await expectCode(.notAMember) {   // a Welcome for a non-member
            try await phone.submitCommit(first, to: "#team", epoch: 0,
                                         welcome: CommitWelcome(MLSFraming.welcome(), for: [AddedDevice(user: "carol", device: "phone")]))
        }
        await expectCode(.deviceNotCertified) { try await tablet.submitCommit(first, to: "#team", epoch: 0) }
        let before = try await desk.fetchCommits(in: "#team", fromEpoch: 0)
        #expect(before.epoch == 0 && before.commits.isEmpty && before.welcome == nil && !before.more, "nothing refused was stored")

        // alice's two devices race for epoch 0, each adding bob's desk with its own Welcome.
        let commits = [Self.commit(0, team), Self.commit(0, team)]
        let welcomes = [MLSFraming.welcome(infoBytes: 400), MLSFraming.welcome(infoBytes: 400)]
        let (winner, loss) = await race(phone, commits[0], CommitWelcome(welcomes[0], for: [AddedDevice(user: "bob", device: "desk")]),
                                        laptop, commits[1], CommitWelcome(welcomes[1], for: [AddedDevice(user: "bob", device: "desk")]),
                                        in: "#team", epoch: 0)
        try #require(winner >= 0)
        let loser = 1 - winner
        #expect(loss?.errorCode == .commitConflict, "\(String(describing: loss))")
        #expect(loss?.message.contains("at epoch 1") == true, "the code names the current epoch: \(String(describing: loss))")

        // The loser fetches what won, and commits again on the new epoch (without a Welcome now):
        // a new commit, as its old one is framed on epoch 0.
        let losingDevice = [phone, laptop][loser]
        let seen = try await losingDevice.fetchCommits(in: "#team", fromEpoch: 0)
        #expect(seen.epoch == 1 && seen.commits.map(\.commit) == [commits[winner]] && seen.welcome == nil)
        #expect(seen.commits.first?.fromUser == "alice" && seen.commits.first?.fromDevice == ["phone", "laptop"][winner])
        await expectCode(.invalidCommit) { try await losingDevice.submitCommit(commits[loser], to: "#team", epoch: 1) }
        let again = Self.commit(1, team)
        #expect(try await losingDevice.submitCommit(again, to: "#team", epoch: 1) == 2)

        // bob's desk gets the winner's Welcome, never the loser's, and the commits after it.
        let joined = try await desk.fetchCommits(in: "#team", fromEpoch: 0, join: true)
        #expect(joined.welcome?.welcome == welcomes[winner] && joined.welcome?.epoch == 1)
        #expect(joined.welcome?.welcome != welcomes[loser])
        #expect(joined.commits.map(\.epoch) == [1] && joined.commits.map(\.commit) == [again])
        #expect(try await tablet.fetchCommits(in: "#team", fromEpoch: 0, join: true).welcome == nil, "a Welcome is its device's only")
        let member = try await desk.fetchCommits(in: "#team", fromEpoch: 0)
        #expect(member.welcome == nil && member.commits.map(\.epoch) == [0, 1], "without join: every commit from the epoch asked, no Welcome")

        // More commits; a device catches up from epoch 2 through them in order.
        var later: [[UInt8]] = []
        for epoch in UInt64(2)..<7 {
            later.append(Self.commit(epoch, team))
            #expect(try await [desk, phone][Int(epoch) % 2].submitCommit(later.last!, to: "#team", epoch: epoch) == epoch + 1)
        }
        let caughtUp = try await tablet.fetchCommits(in: "#team", fromEpoch: 2)
        #expect(caughtUp.epoch == 7 && !caughtUp.more)
        #expect(caughtUp.commits.map(\.epoch) == [2, 3, 4, 5, 6] && caughtUp.commits.map(\.commit) == later)
        #expect(caughtUp.commits.map(\.fromUser) == ["bob", "alice", "bob", "alice", "bob"])
        await expectCode(.commitConflict) { try await desk.submitCommit(Self.commit(9, team), to: "#team", epoch: 9) }
        await expectCode(.commitConflict) { try await desk.submitCommit(Self.commit(3, team), to: "#team", epoch: 3) }

        // The group gone, its commits go: a group made again under the name starts at epoch 0.
        try await desk.leaveGroup("team")
        try await phone.leaveGroup("team")
        _ = try await phone.createGroup("team")
        #expect(try await phone.fetchCommits(in: "#team", fromEpoch: 0).epoch == 0)
        // Its MLS group went too: the new group's first commit records its own.
        #expect(try await phone.submitCommit(Self.commit(0, MLSFraming.groupID()), to: "#team", epoch: 0) == 1)

        for client in [phone, laptop, desk, tablet, carol] { await client.close() }
        await cluster.stop()
    }

    @Test func aOneToOneConversationHasOneOrderFromEitherSide() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (desk, _) = try await cluster.connectedDevice("bob", "desk")
        try await certify(phone, KeyFixtures("alice"), device: "phone")
        try await certify(desk, KeyFixtures("bob"), device: "desk")

        let pair = MLSFraming.groupID()
        let (first, second) = (Self.commit(0, pair), Self.commit(1, pair))
        await expectCode(.unknownUser) { try await phone.submitCommit(first, to: "nobody", epoch: 0) }
        await expectCode(.notAMember) {   // a Welcome for a third user
            try await phone.submitCommit(first, to: "bob", epoch: 0,
                                         welcome: CommitWelcome(MLSFraming.welcome(), for: [AddedDevice(user: "carol", device: "phone")]))
        }
        await expectCode(.deviceNotCertified) {   // a Welcome for a device with no certificate
            try await phone.submitCommit(first, to: "bob", epoch: 0,
                                         welcome: CommitWelcome(MLSFraming.welcome(), for: [AddedDevice(user: "bob", device: "ghost")]))
        }
        let welcome = MLSFraming.welcome(infoBytes: 300)
        #expect(try await phone.submitCommit(first, to: "bob", epoch: 0, welcome: CommitWelcome(welcome, for: [AddedDevice(user: "bob", device: "desk")])) == 1)
        // bob names the conversation by alice: the same order.
        let page = try await desk.fetchCommits(in: "alice", fromEpoch: 0, join: true)
        #expect(page.conversation == "alice" && page.epoch == 1 && page.welcome?.welcome == welcome && page.welcome?.fromUser == "alice")
        #expect(page.commits.isEmpty, "the Welcome joins at epoch 1: nothing before it to process")
        await expectCode(.commitConflict) { try await desk.submitCommit(Self.commit(0, pair), to: "alice", epoch: 0) }
        #expect(try await desk.submitCommit(second, to: "alice", epoch: 1) == 2)
        let fromAlice = try await phone.fetchCommits(in: "bob", fromEpoch: 0)
        #expect(fromAlice.commits.map(\.commit) == [first, second] && fromAlice.commits.map(\.fromUser) == ["alice", "bob"])

        for client in [phone, desk] { await client.close() }
        await cluster.stop()
    }

    /// A commit that adds several devices sends its one Welcome once (RFC 9420 section
    /// 12.4.3.1: one Welcome for all new members); the server stores it once and hands it to each
    /// device the commit adds on `fetchCommits{join}`, and to none before the commit is stored
    /// (a refused or losing submit stores nothing).
    @Test func oneWelcomeForSeveralDevicesReachesEachOnlyOnceItsCommitIsStored() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob", "carol"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["bob", "carol"])
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (desk, _) = try await cluster.connectedDevice("bob", "desk")
        let (tablet, _) = try await cluster.connectedDevice("bob", "tablet")
        let (carol, _) = try await cluster.connectedDevice("carol", "laptop")
        let (bob, carolKeys) = (KeyFixtures("bob"), KeyFixtures("carol"))
        try await certify(phone, KeyFixtures("alice"), device: "phone")
        try await certify(desk, bob, device: "desk")
        try await certify(tablet, bob, device: "tablet")
        try await certify(carol, carolKeys, device: "laptop")
        _ = try await phone.createGroup("team", members: ["bob", "carol"])
        let team = MLSFraming.groupID()
        let added = [AddedDevice(user: "bob", device: "desk"), AddedDevice(user: "bob", device: "tablet"), AddedDevice(user: "carol", device: "laptop")]
        let joiners = [desk, tablet, carol]
        #expect(try await phone.submitCommit(Self.commit(0, team), to: "#team", epoch: 0) == 1)

        // Not stored (framed on the wrong epoch, then a lost race): no device gets its Welcome.
        let welcome = MLSFraming.welcome(secrets: added.count, infoBytes: 2_000)
        await expectCode(.invalidCommit) {
            try await phone.submitCommit(Self.commit(0, team), to: "#team", epoch: 1, welcome: CommitWelcome(welcome, for: added))
        }
        await expectCode(.commitConflict) {
            try await phone.submitCommit(Self.commit(0, team), to: "#team", epoch: 0, welcome: CommitWelcome(welcome, for: added))
        }
        for joiner in joiners {
            let page = try await joiner.fetchCommits(in: "#team", fromEpoch: 0, join: true)
            #expect(page.welcome == nil && page.epoch == 1, "no Welcome before its commit is stored")
        }

        // Stored: the one Welcome reaches each of the three devices, into epoch 2.
        #expect(try await phone.submitCommit(Self.commit(1, team), to: "#team", epoch: 1, welcome: CommitWelcome(welcome, for: added)) == 2)
        let later = Self.commit(2, team)
        #expect(try await phone.submitCommit(later, to: "#team", epoch: 2) == 3)
        for joiner in joiners {
            let page = try await joiner.fetchCommits(in: "#team", fromEpoch: 0, join: true)
            #expect(page.welcome?.welcome == welcome && page.welcome?.epoch == 2 && page.welcome?.fromDevice == "phone")
            #expect(page.commits.map(\.commit) == [later], "the page starts at the Welcome's epoch")
        }

        for client in [phone, desk, tablet, carol] { await client.close() }
        await cluster.stop()
    }

    /// A commit every member would refuse for its framing (issue 44: stored on the current epoch
    /// it would stop every later commit): framed on another epoch than it is submitted for, for
    /// another MLS group than the conversation's, or no commit at all, is `INVALID_COMMIT` and
    /// stores nothing, its Welcome included; the conversation's next valid commit is stored.
    @Test func aCommitFramedForAnotherEpochOrGroupIsRefusedAndTheNextValidOneIsStored() async throws {
        let cluster = try await TestCluster.start()
        for user in ["alice", "bob"] { try await cluster.register(user) }
        try cluster.letAnyoneAdd(["bob"])
        let (phone, _) = try await cluster.connectedDevice("alice", "phone")
        let (desk, _) = try await cluster.connectedDevice("bob", "desk")
        try await certify(phone, KeyFixtures("alice"), device: "phone")
        try await certify(desk, KeyFixtures("bob"), device: "desk")
        _ = try await phone.createGroup("team", members: ["bob"])
        let team = MLSFraming.groupID()
        #expect(try await phone.submitCommit(Self.commit(0, team), to: "#team", epoch: 0) == 1)

        let toDesk = CommitWelcome(MLSFraming.welcome(), for: [AddedDevice(user: "bob", device: "desk")])
        await expectCode(.invalidCommit) {   // made on epoch 0, submitted for epoch 1
            try await desk.submitCommit(Self.commit(0, team), to: "#team", epoch: 1, welcome: toDesk)
        }
        await expectCode(.invalidCommit) {   // made on epoch 2, submitted for epoch 1
            try await desk.submitCommit(Self.commit(2, team), to: "#team", epoch: 1, welcome: toDesk)
        }
        await expectCode(.invalidCommit) {   // framed for another group
            try await desk.submitCommit(Self.commit(1, MLSFraming.groupID()), to: "#team", epoch: 1, welcome: toDesk)
        }
        await expectCode(.invalidCommit) { try await desk.submitCommit(Self.random(200), to: "#team", epoch: 1) }
        await expectCode(.invalidCommit) {   // a Welcome that does not decode
            try await desk.submitCommit(Self.commit(1, team), to: "#team", epoch: 1,
                                        welcome: CommitWelcome(Self.random(100), for: [AddedDevice(user: "bob", device: "desk")]))
        }
        let page = try await desk.fetchCommits(in: "#team", fromEpoch: 0, join: true)
        #expect(page.epoch == 1 && page.commits.count == 1 && page.welcome == nil, "nothing refused was stored")

        let next = Self.commit(1, team)
        #expect(try await desk.submitCommit(next, to: "#team", epoch: 1) == 2)
        #expect(try await phone.fetchCommits(in: "#team", fromEpoch: 1).commits.map(\.commit) == [next])

        for client in [phone, desk] { await client.close() }
        await cluster.stop()
    }

    /// On a Redis Cluster, through two nodes: a group's commit scripts touch its slot only, and
    /// the race is decided there whichever node each device is on.
    @Test func theOrderHoldsOnARedisClusterAcrossNodes() async throws {
        let deployment = try Deployment(nodes: 2, cluster: true)
        defer { deployment.stop() }
        let owner = try await deployment.connect("coalice", startingAt: 0)
        let member = try await deployment.connect("cobob", startingAt: 1)
        try deployment.letAnyoneAdd(["cobob"])
        _ = try await owner.client.createGroup("coteam", members: ["cobob"])
        try await certify(owner.client, KeyFixtures("coalice"), device: await owner.client.deviceName())
        try await certify(member.client, KeyFixtures("cobob"), device: await member.client.deviceName())

        let coteam = MLSFraming.groupID()
        let commits = [Self.commit(0, coteam), Self.commit(0, coteam)]
        let (winner, loss) = await race(owner.client, commits[0], nil, member.client, commits[1], nil, in: "#coteam", epoch: 0)
        try #require(winner >= 0)
        #expect(loss?.errorCode == .commitConflict)
        let loser = [owner.client, member.client][1 - winner]
        let again = Self.commit(1, coteam)
        await expectCode(.invalidCommit) { try await loser.submitCommit(Self.commit(1, MLSFraming.groupID()), to: "#coteam", epoch: 1) }
        #expect(try await loser.submitCommit(again, to: "#coteam", epoch: 1) == 2)
        for user in [owner, member] {
            let page = try await user.client.fetchCommits(in: "#coteam", fromEpoch: 0)
            #expect(page.commits.map(\.commit) == [commits[winner], again])
        }
        // A one-to-one conversation's keys are in a slot of their own, apart from both users'.
        let direct = Self.commit(0, MLSFraming.groupID())
        #expect(try await owner.client.submitCommit(direct, to: "cobob", epoch: 0) == 1)
        #expect(try await member.client.fetchCommits(in: "coalice", fromEpoch: 0).commits.map(\.commit) == [direct])
        for user in [owner, member] { await user.client.close() }
    }
}
