import Crypto
import Foundation
@testable import SIMPServer
import SIMPCore
import SIMPTestSupport
import Testing

/// The commit order's pure parts (docs/E2EE.md, Part 3): each request's steps in `CommitFlow`,
/// events in (made-up reads and script results), actions out, at a given time.
@Suite struct CommitFlowTests {
    let now: Int64 = 1_800_000_000_000
    /// The MLS group the tests' commits are framed for.
    static let group = Array("the team's group".utf8)
    /// The key alice/phone's certificate certifies.
    static let phoneKey = [UInt8](repeating: 0x0f, count: 32)

    func makeFlow(_ body: Simp_Envelope.OneOf_Body, user: String = "alice", device: String = "phone") throws -> CommitFlow {
        let request = try #require(CommitFlow.request(from: body, user: user)).get()
        return CommitFlow(request, user: user, device: device, nowMillis: now)
    }

    /// `commit`: by default one framed for `Self.group` on `epoch` (`MLSFraming`). `welcome`
    /// with `added`: the commit's one Welcome; `perDevice`: the per-device copies of the
    /// migration window (docs/PROTOCOL.md, Commits).
    func submit(_ conversation: String, epoch: UInt64, commit: [UInt8]? = nil, welcome: [UInt8] = [],
                added: [(String, String)] = [], perDevice: [(String, String, [UInt8])] = []) -> Simp_Envelope.OneOf_Body {
        var submit = Simp_SubmitCommit()
        submit.conversation = conversation
        submit.epoch = epoch
        submit.commit = Data(commit ?? MLSFraming.commit(group: Self.group, epoch: epoch))
        submit.welcome = Data(welcome)
        submit.added = added.map { user, device in
            var wire = Simp_AddedDevice()
            wire.user = user
            wire.device = device
            return wire
        }
        submit.welcomes = perDevice.map { user, device, bytes in
            var copy = Simp_CommitWelcome()
            copy.user = user
            copy.device = device
            copy.welcome = Data(bytes)
            return copy
        }
        return .submitCommit(submit)
    }

    /// The framing a submit's first step decodes (as the worker does, off the loop).
    func framing(_ flow: CommitFlow) throws -> CommitFraming {
        guard case .checkFraming(let unchecked, let epoch) = flow.start() else { throw FlowRefusal(.internal, "no framing step") }
        return try unchecked.checking(epoch: epoch).get()
    }

    func fetch(_ conversation: String, from: UInt64, join: Bool = false) -> Simp_Envelope.OneOf_Body {
        var fetch = Simp_FetchCommits()
        fetch.conversation = conversation
        fetch.fromEpoch = from
        fetch.join = join
        return .fetchCommits(fetch)
    }

    func refusal(_ body: Simp_Envelope.OneOf_Body, user: String = "alice") -> Simp_ErrorCode? {
        if case .failure(let refusal)? = CommitFlow.request(from: body, user: user) { refusal.code } else { nil }
    }

    // MARK: conversations

    @Test func aConversationIsAGroupOrThePairOfUsersTheSameFromEitherSide() {
        #expect(CommitConversation("#team", asker: "alice") == .group("team"))
        #expect(CommitConversation("bob", asker: "alice") == .direct(user: "alice", peer: "bob"))
        #expect(CommitConversation("bob", asker: "alice")?.tag == CommitConversation("alice", asker: "bob")?.tag)
        #expect(CommitConversation("bob", asker: "alice")?.tag == "@alice+bob")
        #expect(CommitConversation("#team", asker: "alice")?.tag == "#team")
        for bad in ["", "#", "#Team", "Bob", "a b", "@alice+bob"] { #expect(CommitConversation(bad, asker: "alice") == nil, "\(bad)") }
    }

    // MARK: requests refused before they run

    @Test func namesSizesAndCountsAreCheckedFirst() {
        #expect(refusal(submit("#Bad", epoch: 0)) == .badRequest)
        #expect(refusal(submit("alice", epoch: 0)) == .badRequest, "not with oneself")
        #expect(refusal(submit("bob", epoch: 0, commit: [])) == .badRequest)
        #expect(refusal(submit("bob", epoch: 0, commit: Array(repeating: 1, count: CommitRules.maxCommitBytes + 1))) == .badRequest)
        #expect(refusal(submit("bob", epoch: 0, commit: Array(repeating: 1, count: CommitRules.maxCommitBytes))) == nil)
        let most = (0..<CommitRules.maxAddedDevices).map { ("bob", "d\($0)") }
        #expect(refusal(submit("#team", epoch: 0, welcome: [1], added: most)) == nil)
        #expect(refusal(submit("#team", epoch: 0, welcome: [1], added: most + [("bob", "one-more")])) == .badRequest)
        #expect(refusal(submit("#team", epoch: 0, welcome: [1], added: [("bob", "phone"), ("bob", "phone")])) == .badRequest, "twice one device")
        #expect(refusal(submit("#team", epoch: 0, welcome: [1], added: [("bob", "Phone!")])) == .badRequest)
        #expect(refusal(submit("#team", epoch: 0, welcome: Array(repeating: 1, count: CommitRules.maxWelcomeBytes), added: [("bob", "phone")])) == nil)
        #expect(refusal(submit("#team", epoch: 0, welcome: Array(repeating: 1, count: CommitRules.maxWelcomeBytes + 1), added: [("bob", "phone")])) == .badRequest)
        // A Welcome goes with the devices it adds, and devices added with a Welcome.
        #expect(refusal(submit("#team", epoch: 0, welcome: [1])) == .badRequest, "a Welcome for no device")
        #expect(refusal(submit("#team", epoch: 0, added: [("bob", "phone")])) == .badRequest, "devices added with no Welcome")
        // A one-to-one conversation's Welcome goes to its two users only.
        #expect(refusal(submit("bob", epoch: 0, welcome: [1], added: [("carol", "phone")])) == .notAMember)
        #expect(refusal(submit("bob", epoch: 0, welcome: [1], added: [("bob", "phone"), ("alice", "laptop")])) == nil)
        #expect(refusal(fetch("#", from: 0)) == .badRequest)
        #expect(CommitFlow.request(from: .ping(Simp_Ping()), user: "alice") == nil, "not a commit request")
    }

    /// One Welcome for every device a commit adds; the per-device copies older clients send
    /// are taken, in the migration window, as that one Welcome when they are the same bytes.
    @Test func oneWelcomeIsTakenForEveryDeviceItAddsAndSameCopiesAsIt() throws {
        let (commit, welcome) = (MLSFraming.commit(group: Self.group, epoch: 3), MLSFraming.welcome())
        let one = try #require(CommitFlow.request(from: submit("#team", epoch: 3, commit: commit, welcome: welcome, added: [("bob", "desk"), ("carol", "phone")]),
                                                  user: "alice")).get()
        let expected = CommitRequest.Welcome(bytes: welcome, added: [.init(user: "bob", device: "desk"), .init(user: "carol", device: "phone")])
        #expect(one == .submit(.group("team"), epoch: 3, commit: commit, welcome: expected))
        let copies = try #require(CommitFlow.request(from: submit("#team", epoch: 3, commit: commit, perDevice: [("bob", "desk", welcome), ("carol", "phone", welcome)]),
                                                     user: "alice")).get()
        #expect(copies == one, "the same copies are the one Welcome")
        #expect(refusal(submit("#team", epoch: 3, perDevice: [("bob", "desk", welcome), ("carol", "phone", MLSFraming.welcome())])) == .badRequest,
                "copies that differ are no one commit's Welcome")
        #expect(refusal(submit("#team", epoch: 3, welcome: welcome, added: [("bob", "desk")], perDevice: [("carol", "phone", welcome)])) == .badRequest,
                "both forms at once")
        #expect(refusal(submit("#team", epoch: 3, perDevice: [("bob", "desk", [])])) == .badRequest, "an empty copy")
        #expect(refusal(submit("#team", epoch: 3, perDevice: [("bob", "desk", welcome), ("bob", "desk", welcome)])) == .badRequest, "twice one device")
        #expect(refusal(submit("bob", epoch: 3, perDevice: [("carol", "phone", welcome)])) == .notAMember)
    }

    @Test func anEpochPastWhatTheStoreCountsExactlyIsRefusedNotAddedTo() throws {
        // UInt64.max + 1 trapped the server; a Lua double counts exactly only to 2^53.
        let (welcome, desk) = (MLSFraming.welcome(), [("bob", "desk")])
        #expect(refusal(submit("bob", epoch: .max, welcome: welcome, added: desk)) == .badRequest)
        #expect(refusal(submit("#team", epoch: CommitRules.maxEpoch, welcome: welcome, added: desk)) == .badRequest)
        #expect(refusal(submit("#team", epoch: CommitRules.maxEpoch - 1, welcome: welcome, added: desk)) == nil, "the last epoch a commit is made on")
        #expect(refusal(fetch("bob", from: .max)) == .badRequest)
        #expect(refusal(fetch("#team", from: CommitRules.maxEpoch + 1)) == .badRequest)
        #expect(refusal(fetch("#team", from: CommitRules.maxEpoch)) == nil)
        // A flow made from an unchecked request refuses too, rather than trap on epoch + 1.
        let unchecked = CommitFlow(.submit(.group("team"), epoch: .max, commit: [1], welcome: .init(bytes: [1], added: [.init(user: "bob", device: "desk")])),
                                   user: "alice", device: "phone", nowMillis: now)
        let someFraming = try UncheckedCommit(commit: MLSFraming.commit(group: Self.group, epoch: 0), welcome: nil, added: 0).checking(epoch: 0).get()
        guard case .refuse(.badRequest, _) = unchecked.checked(.init(certifiedKey: Self.phoneKey, peerExists: true), framing: someFraming) else {
            Issue.record("not BAD_REQUEST"); return
        }
        let last = try makeFlow(submit("#team", epoch: CommitRules.maxEpoch - 1, welcome: welcome, added: desk))
        guard case .store(_, _, _, _, let kept, _, _, _) = last.checked(.init(certifiedKey: Self.phoneKey, peerExists: true), framing: try framing(last)) else { Issue.record("no store"); return }
        #expect(try Simp_StoredWelcome(serializedBytes: try #require(kept).value).epoch == CommitRules.maxEpoch)
    }

    // MARK: a submit

    /// A commit with a path carries the committer's new leaf, which every member checks against
    /// the device's certificate: a leaf under another key (the old holder of a device name
    /// certified since under a new one) is DEVICE_NOT_CERTIFIED, one naming another device
    /// INVALID_COMMIT, one whose signature does not verify under the key it names (over the
    /// group and the committer's leaf) INVALID_COMMIT with the framing; nothing stored. Under the
    /// certified key, signed by it, it is stored.
    @Test func aCommitsPathLeafMustBeTheSubmittingDevicesUnderItsCertifiedKey() throws {
        let identity = KeyDirectoryRules.credentialIdentity(user: "alice", device: "phone")
        let phone = Curve25519.Signing.PrivateKey()
        let certifiedKey = Array(phone.publicKey.rawRepresentation)
        func checked(_ path: MLSFraming.PathLeaf) throws -> CommitFlow.Next {
            let flow = try makeFlow(submit("bob", epoch: 2, commit: MLSFraming.commit(group: Self.group, epoch: 2, leaf: 3, path: path)))
            let framed = try framing(flow)
            #expect(framed.pathLeaf == .init(identity: path.identity, signatureKey: Array(path.signer.publicKey.rawRepresentation)))
            return flow.checked(.init(certifiedKey: certifiedKey, peerExists: true), framing: framed)
        }
        guard case .store = try checked(.init(identity: identity, signer: phone)) else { Issue.record("the certified key's leaf not stored"); return }
        guard case .refuse(.deviceNotCertified, _) = try checked(.init(identity: identity, signer: Curve25519.Signing.PrivateKey())) else {
            Issue.record("a leaf under another key not DEVICE_NOT_CERTIFIED"); return
        }
        let laptop = KeyDirectoryRules.credentialIdentity(user: "alice", device: "laptop")
        guard case .refuse(.invalidCommit, _) = try checked(.init(identity: laptop, signer: phone)) else {
            Issue.record("a leaf naming another device not INVALID_COMMIT"); return
        }
        // The certified key named, signed by another: refused with the framing, before any read.
        let forged = MLSFraming.commit(group: Self.group, epoch: 2, leaf: 3,
                                       path: .init(identity: identity, signer: Curve25519.Signing.PrivateKey(), claimedKey: certifiedKey))
        #expect(throws: UncheckedCommit.Problem.self) { try UncheckedCommit(commit: forged, welcome: nil, added: 0).checked(epoch: 2) }
        // Without a path there is no leaf to check (a commit of Adds alone may have none).
        #expect(try framing(try makeFlow(submit("bob", epoch: 2))).pathLeaf == nil)
    }

    @Test func aSubmitReadsTheDeviceAndThePeerThenStoresWithItsWelcome() throws {
        let (commit, madeWelcome) = (MLSFraming.commit(group: Self.group, epoch: 4), MLSFraming.welcome(secrets: 2))
        let flow = try makeFlow(submit("bob", epoch: 4, commit: commit, welcome: madeWelcome, added: [("bob", "desk"), ("alice", "laptop")]))
        #expect(flow.start() == .checkFraming(UncheckedCommit(commit: commit, welcome: madeWelcome, added: 2), epoch: 4), "decoded first, off the loop")
        let framed = try framing(flow)
        #expect(framed.groupID == Self.group && framed.epoch == 4)
        #expect(flow.framed(.success(framed))
            == .readSubmitter(user: "alice", device: "phone", peer: "bob", added: [.init(user: "bob", device: "desk"), .init(user: "alice", device: "laptop")],
                              framing: framed))
        guard case .refuse(.unknownUser, _) = flow.checked(.init(certifiedKey: Self.phoneKey, peerExists: false), framing: framed) else { Issue.record("not UNKNOWN_USER"); return }
        guard case .refuse(.deviceNotCertified, _) = flow.checked(.init(certifiedKey: nil, peerExists: true), framing: framed) else {
            Issue.record("not DEVICE_NOT_CERTIFIED"); return
        }
        guard case .refuse(.deviceNotCertified, let why) = flow.checked(.init(certifiedKey: Self.phoneKey, peerExists: true, uncertifiedAdded: .init(user: "bob", device: "desk")),
                                                                        framing: framed) else {
            Issue.record("a Welcome for an uncertified device not DEVICE_NOT_CERTIFIED"); return
        }
        #expect(why.contains("bob/desk"), "\(why)")
        guard case .store(let conversation, let user, let epoch, let entry, let welcome, let kept, let group, _) = flow.checked(.init(certifiedKey: Self.phoneKey, peerExists: true),
                                                                                                                         framing: framed) else {
            Issue.record("no store"); return
        }
        #expect(conversation == .direct(user: "alice", peer: "bob") && user == "alice" && epoch == 4 && kept == CommitRules.keptCommits)
        #expect(group == Self.group, "the store compares the group the commit is framed for")
        let stored = try Simp_StoredCommit(serializedBytes: entry)
        #expect(stored.epoch == 4 && stored.commit == Data(commit) && stored.fromUser == "alice" && stored.fromDevice == "phone")
        #expect(stored.serverTime == now, "the request's time, not a clock read")
        // Kept once, for both devices it adds.
        let once = try #require(welcome)
        #expect(once.devices == [.init(user: "bob", field: "bob/desk"), .init(user: "alice", field: "alice/laptop")])
        let storedWelcome = try Simp_StoredWelcome(serializedBytes: once.value)
        #expect(storedWelcome.epoch == 5 && storedWelcome.welcome == Data(madeWelcome) && storedWelcome.fromDevice == "phone"
                    && storedWelcome.serverTime == now)
    }

    @Test func aGroupSubmitReadsOnlyTheDevice() throws {
        let flow = try makeFlow(submit("#team", epoch: 0))
        let framed = try framing(flow)
        #expect(flow.framed(.success(framed)) == .readSubmitter(user: "alice", device: "phone", peer: nil, added: [], framing: framed))
    }

    @Test func theScriptsAnswerBecomesTheAnswerOrItsCode() throws {
        let flow = try makeFlow(submit("#team", epoch: 4))
        guard case .answer(.commitStored(let stored)) = flow.stored(.stored(epoch: 5)) else { Issue.record("not stored"); return }
        #expect(stored.conversation == "#team" && stored.epoch == 5)
        guard case .refuse(.commitConflict, let reason) = flow.stored(.conflict(current: 6)) else { Issue.record("no conflict"); return }
        #expect(reason.contains("epoch 4 is committed already") && reason.contains("at epoch 6"), "\(reason)")
        guard case .refuse(.commitConflict, let ahead) = flow.stored(.conflict(current: 2)) else { Issue.record("no conflict"); return }
        #expect(ahead.contains("not reached yet") && ahead.contains("at epoch 2"), "\(ahead)")
        guard case .refuse(.replicasUnavailable, let unconfirmed) = flow.stored(.unreplicated(epoch: 5, confirmed: 0)) else {
            Issue.record("an unconfirmed commit not REPLICAS_UNAVAILABLE"); return
        }
        #expect(unconfirmed.contains("epoch 4"), "\(unconfirmed)")
        guard case .refuse(.notAMember, _) = flow.stored(.notAMember) else { Issue.record("not NOT_A_MEMBER"); return }
        guard case .refuse(.noSuchGroup, _) = flow.stored(.noSuchGroup) else { Issue.record("not NO_SUCH_GROUP"); return }
        guard case .refuse(.notAMember, let who) = flow.stored(.welcomeToNonMember("carol")) else { Issue.record("not NOT_A_MEMBER"); return }
        #expect(who.contains("carol"))
        guard case .refuse(.invalidCommit, let other) = flow.stored(.otherGroup) else { Issue.record("another group's commit not INVALID_COMMIT"); return }
        #expect(other.contains("another MLS group") && other.contains("#team"), "\(other)")
    }

    @Test func aCommitEveryMemberWouldRefuseForItsFramingIsRefusedBeforeAnyRead() throws {
        let (welcome, desk) = (MLSFraming.welcome(), [("bob", "desk")])
        let cases: [(String, Simp_Envelope.OneOf_Body)] = [
            ("framed on another epoch", submit("#team", epoch: 4, commit: MLSFraming.commit(group: Self.group, epoch: 3), welcome: welcome, added: desk)),
            ("no MLSMessage", submit("#team", epoch: 4, commit: [1, 2, 3], welcome: welcome, added: desk)),
            ("a Welcome that does not decode", submit("#team", epoch: 4, welcome: [1, 2, 3], added: desk)),
            ("a Welcome as the commit", submit("#team", epoch: 4, commit: MLSFraming.welcome(), welcome: welcome, added: desk)),
            ("a Welcome with no secrets for its device", submit("#team", epoch: 4, welcome: MLSFraming.welcome(secrets: 0), added: desk)),
            ("a Welcome with one secret for two devices", submit("#team", epoch: 4, welcome: welcome, added: desk + [("carol", "phone")])),
        ]
        for (what, body) in cases {
            let flow = try makeFlow(body)
            guard case .checkFraming(let unchecked, 4) = flow.start() else { Issue.record("\(what): not decoded first"); continue }
            guard case .refuse(.invalidCommit, let reason) = flow.framed(unchecked.checking(epoch: 4)) else {
                Issue.record("\(what): not INVALID_COMMIT"); continue
            }
            #expect(!reason.isEmpty)
        }
        let valid = try makeFlow(submit("#team", epoch: 4, welcome: welcome, added: desk))
        guard case .readSubmitter(_, _, _, let added, let framed) = valid.framed(.success(try framing(valid))) else {
            Issue.record("a valid commit not read on"); return
        }
        #expect(added == [.init(user: "bob", device: "desk")] && framed.groupID == Self.group)
    }

    // MARK: a fetch

    @Test func aFetchAsksForTheDevicesWelcomeAndAPageAndAnswersThem() throws {
        let flow = try makeFlow(fetch("#team", from: 3, join: true), user: "bob", device: "desk")
        #expect(flow.start() == .fetch(.group("team"), user: "bob", welcomeField: "bob/desk", external: false, fromEpoch: 3,
                                       maxCommits: CommitRules.maxCommitsPerPage, budget: CommitRules.pageBudget,
                                       kept: CommitRules.keptCommits))
        // Without join no Welcome is read: a Welcome never moves a member's page past a commit.
        #expect(try makeFlow(fetch("#team", from: 3), user: "bob", device: "desk").start()
            == .fetch(.group("team"), user: "bob", welcomeField: nil, external: false, fromEpoch: 3, maxCommits: CommitRules.maxCommitsPerPage,
                      budget: CommitRules.pageBudget, kept: CommitRules.keptCommits))
        func commit(_ epoch: UInt64) throws -> [UInt8] {
            var stored = Simp_StoredCommit()
            stored.epoch = epoch
            stored.commit = Data([UInt8(epoch)])
            stored.fromUser = "alice"
            return try stored.serializedBytes()
        }
        var welcome = Simp_StoredWelcome()
        welcome.epoch = 5
        welcome.welcome = Data([42])
        let kept: [UInt8] = try welcome.serializedBytes()
        guard case .answer(.commitPage(let page)) = flow.fetched(.page(current: 7, welcome: kept, commits: [try commit(5), try commit(6)], more: true)) else {
            Issue.record("no page"); return
        }
        #expect(page.conversation == "#team" && page.epoch == 7 && page.more)
        #expect(page.commits.map(\.epoch) == [5, 6] && page.commits.map(\.commit) == [Data([5]), Data([6])])
        #expect(page.hasWelcome && page.welcome.epoch == 5 && page.welcome.welcome == Data([42]))
        guard case .answer(.commitPage(let empty)) = flow.fetched(.page(current: 3, welcome: nil, commits: [], more: false)) else {
            Issue.record("no page"); return
        }
        #expect(!empty.hasWelcome && empty.commits.isEmpty && empty.epoch == 3)
        // A stored commit or Welcome that does not decode is an internal error, never a page with a gap.
        let broken: [UInt8] = [0x0a, 0x05, 0x01]
        guard case .refuse(.internal, _) = flow.fetched(.page(current: 7, welcome: nil, commits: [try commit(5), broken, try commit(6)], more: false)) else {
            Issue.record("an undecodable commit not INTERNAL"); return
        }
        guard case .refuse(.internal, _) = flow.fetched(.page(current: 7, welcome: broken, commits: [], more: false)) else {
            Issue.record("an undecodable Welcome not INTERNAL"); return
        }
        guard case .refuse(.notAMember, _) = flow.fetched(.notAMember) else { Issue.record("not NOT_A_MEMBER"); return }
        guard case .refuse(.noSuchGroup, _) = flow.fetched(.noSuchGroup) else { Issue.record("not NO_SUCH_GROUP"); return }
    }

    // MARK: the control machine and pricing

    @Test func theMachineNeedsALoginChecksFirstAndHandsTheFlowTheLoginsDeviceAndTime() throws {
        var connection = ControlMachineTests.Connection(ControlMachineTests.node())
        #expect(connection.frame(fetch("#team", from: 0)) == ["send #1 error not_authenticated"])
        connection.logIn("alice", device: "phone")
        #expect(connection.frame(submit("bob", epoch: 0, commit: [])) == ["send #1 error bad_request"], "refused before any work")
        #expect(connection.frame(.commitStored(Simp_CommitStored())) == ["send #1 error bad_request"], "an answer is no request")
        #expect(connection.frame(.commitPage(Simp_CommitPage())) == ["send #1 error bad_request"], "an answer is no request")
        let commit = MLSFraming.commit(group: Self.group, epoch: 2)
        let actions = connection.raw(.frame(Simp_Envelope(requestID: 4, submit("#team", epoch: 2, commit: commit))))
        guard case .run(.commits(let id, let flow))? = actions.last else { Issue.record("no commit work: \(actions.map(ControlMachineTests.line))"); return }
        #expect(id == 4 && flow.user == "alice" && flow.device == "phone" && flow.nowMillis == connection.at.millis)
        #expect(flow.request == .submit(.group("team"), epoch: 2, commit: commit, welcome: nil))
        #expect(flow.start() == .checkFraming(UncheckedCommit(commit: commit, welcome: nil, added: 0), epoch: 2))
    }

    @Test func commitRequestsAreChargedByTheirWork() {
        let three = (0..<3).map { ("bob", "d\($0)") }
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, submit("#team", epoch: 0, welcome: [1], added: three))) == RequestCost.commitSubmit + 3 * RequestCost.perAddedDevice)
        let many = (0..<500).map { ("bob", "d\($0)") }
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, submit("#team", epoch: 0, welcome: [1], added: many)))
                    == RequestCost.commitSubmit + RequestCost.perAddedDevice * CommitRules.maxAddedDevices, "clamped: refused anyway")
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, fetch("#team", from: 0))) == RequestCost.commitFetch)
        // A unit per 4 KiB of the commit and its Welcome together: the Welcome counted once
        // however many devices it adds, in either form.
        let big = submit("#team", epoch: 0, commit: Array(repeating: 1, count: 10_000), welcome: Array(repeating: 1, count: 6_400), added: three)
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, big)) == RequestCost.commitSubmit + 3 * RequestCost.perAddedDevice + 4)
        let copies = submit("#team", epoch: 0, commit: Array(repeating: 1, count: 10_000), perDevice: three.map { ($0.0, $0.1, Array(repeating: 1, count: 6_400)) })
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, copies)) == RequestCost.commitSubmit + 3 * RequestCost.perAddedDevice + 4)
    }
}
