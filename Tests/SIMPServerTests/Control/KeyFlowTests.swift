import Foundation
@testable import SIMPServer
import SIMPCore
import SIMPMLS
import Testing

/// The key directory's pure parts (docs/E2EE.md, Part 2): the KeyPackage checks, and each
/// request's steps in `KeyFlow` with made-up reads and store results.
@Suite struct KeyFlowTests {
    let alice = KeyFixtures("alice")
    let now = Int64(KeyFixtures.now) * 1000

    func makeFlow(_ body: Simp_Envelope.OneOf_Body, device: String = "phone") throws -> KeyFlow {
        let request = try #require(KeyFlow.request(from: body)).get()
        return KeyFlow(request, user: "alice", device: device, nowMillis: now, maxDevices: 10)
    }

    func directory(_ certificates: [String: Simp_DeviceCertificate] = [:]) -> KeyFlow.Directory {
        KeyFlow.Directory(userExists: true, identity: alice.identityKey, identitySince: 5,
                          certificates: certificates.mapValues { Array($0.deviceKey) + Array($0.signature) })
    }

    func upload(_ packages: [[UInt8]], lastResort: [UInt8]? = nil) -> Simp_Envelope.OneOf_Body {
        var upload = Simp_UploadKeyPackages()
        upload.keyPackages = packages.map { Data($0) }
        if let lastResort { upload.lastResort = Data(lastResort) }
        return .uploadKeyPackages(upload)
    }

    func problem(_ package: [UInt8], key: [UInt8]) -> UncheckedKeyPackage.Problem? {
        do {
            _ = try UncheckedKeyPackage(bytes: package).checked(user: "alice", device: "phone", certifiedKey: key, nowSeconds: KeyFixtures.now)
            return nil
        } catch {
            return error
        }
    }

    // MARK: KeyPackages

    @Test func aKeyPackageSignedByTheCertifiedKeyPasses() throws {
        let signer = try KeyFixtures.deviceSigner()
        #expect(problem(try alice.keyPackage("phone", signer), key: signer.publicKey.rawRepresentation) == nil)
    }

    @Test func aKeyPackageOfAnotherKeyIsNotCertified() throws {
        let (signer, other) = (try KeyFixtures.deviceSigner(), try KeyFixtures.deviceSigner())
        #expect(problem(try alice.keyPackage("phone", other), key: signer.publicKey.rawRepresentation)?.code == .deviceNotCertified)
    }

    @Test func badKeyPackagesAreInvalid() throws {
        let signer = try KeyFixtures.deviceSigner()
        let key = signer.publicKey.rawRepresentation
        let good = try alice.keyPackage("phone", signer)
        var tampered = good
        tampered[tampered.count - 3] ^= 1
        let bare = Array(good.dropFirst(4))   // the KeyPackage without its MLSMessage header
        let expired = try alice.keyPackage("phone", signer, lifetime: Lifetime(notBefore: 0, notAfter: KeyFixtures.now - 1))
        let otherDevice = try alice.keyPackage("phone", signer, credential: "alice/laptop")
        for package in [tampered, bare, expired, otherDevice, [], [0, 1, 0, 5], Array(good.prefix(40))] {
            #expect(problem(package, key: key)?.code == .invalidKeyPackage)
        }
    }

    // MARK: requests refused before they run

    @Test func sizesCountsAndKeysAreCheckedFirst() {
        func refusal(_ body: Simp_Envelope.OneOf_Body) -> Simp_ErrorCode? {
            if case .failure(let refusal)? = KeyFlow.request(from: body) { refusal.code } else { nil }
        }
        var identity = Simp_PublishIdentity()
        identity.identityKey = Data(repeating: 1, count: 31)
        #expect(refusal(.publishIdentity(identity)) == .badRequest)
        #expect(refusal(upload(Array(repeating: [1], count: KeyDirectoryRules.maxKeyPackagesPerUpload + 1))) == .badRequest)
        #expect(refusal(upload([Array(repeating: 1, count: KeyDirectoryRules.maxKeyPackageBytes + 1)])) == .badRequest)
        #expect(refusal(upload([])) == .badRequest)
        var certificate = Simp_PublishDevice()
        certificate.certificate.device = "phone"
        certificate.certificate.deviceKey = Data(repeating: 1, count: 32)
        #expect(refusal(.publishDevice(certificate)) == .badRequest, "no signature")
        var fetch = Simp_KeyDirectoryRequest()
        fetch.user = "Not A Name"
        #expect(refusal(.keyDirectory(fetch)) == .unknownUser)
        #expect(KeyFlow.request(from: .ping(Simp_Ping())) == nil)
    }

    // MARK: steps

    @Test func anIdentityIsStoredAtOnceAndASecondOneNeedsReplace() throws {
        var publish = Simp_PublishIdentity()
        publish.identityKey = Data(alice.identityKey)
        let flow = try makeFlow(.publishIdentity(publish))
        #expect(flow.start() == .storeIdentity(user: "alice", key: alice.identityKey, replace: false, millis: now))
        #expect(flow.stored(.done(pool: 0, lastResort: false)) == .answer(.ok(Simp_Ok())))
        guard case .refuse(.identityExists, _) = flow.stored(.identityExists) else { Issue.record("not IDENTITY_EXISTS"); return }
    }

    @Test func aDeviceCertificateIsCheckedAgainstTheStoredIdentity() throws {
        let signer = try KeyFixtures.deviceSigner()
        var publish = Simp_PublishDevice()
        publish.certificate = try alice.certificate("phone", signer)
        let flow = try makeFlow(.publishDevice(publish))
        #expect(flow.start() == .read(user: "alice"))
        let stored = Array(publish.certificate.deviceKey) + Array(publish.certificate.signature)
        #expect(flow.read(directory()) == .storeCertificate(user: "alice", device: "phone", certificate: stored, identity: alice.identityKey,
                                                             maxDevices: 10, millis: now))
        guard case .refuse(.noIdentity, _) = flow.read(KeyFlow.Directory(userExists: true)) else { Issue.record("not NO_IDENTITY"); return }
        // Signed by someone else's identity: refused.
        var forged = publish
        forged.certificate = try KeyFixtures("alice").certificate("phone", signer)
        guard case .refuse(.badSignature, _) = try self.makeFlow(.publishDevice(forged)).read(directory()) else { Issue.record("not BAD_SIGNATURE"); return }
        guard case .refuse(.keysChanged, _) = flow.stored(.changed) else { Issue.record("not KEYS_CHANGED"); return }
        guard case .refuse(.tooManyDevices, _) = flow.stored(.tooManyDevices) else { Issue.record("not TOO_MANY_DEVICES"); return }
    }

    @Test func anUploadNeedsTheDevicesCertificateAndStoresWhatPassed() throws {
        let signer = try KeyFixtures.deviceSigner()
        let certificate = try alice.certificate("phone", signer)
        let packages = [try alice.keyPackage("phone", signer), try alice.keyPackage("phone", signer)]
        let last = try alice.keyPackage("phone", signer)
        let flow = try makeFlow(upload(packages + [packages[0]], lastResort: last))
        #expect(flow.start() == .read(user: "alice"))
        #expect(flow.read(directory(["phone": certificate]))
            == .storePackages(user: "alice", device: "phone", certificate: Array(certificate.deviceKey) + Array(certificate.signature),
                              packages: packages, lastResort: last, maxPool: KeyDirectoryRules.maxPoolPerDevice), "the repeat counted once")
        guard case .refuse(.deviceNotCertified, _) = flow.read(directory(["laptop": certificate])) else { Issue.record("not certified"); return }
        // A package of another key, next to good ones: the whole upload is refused.
        let stranger = try makeFlow(upload([packages[0], try alice.keyPackage("phone", try KeyFixtures.deviceSigner())]))
        guard case .refuse(.deviceNotCertified, _) = stranger.read(directory(["phone": certificate])) else { Issue.record("stored"); return }
        var stored = Simp_KeyPackagesStored()
        stored.pool = 2
        stored.lastResort = true
        #expect(flow.stored(.done(pool: 2, lastResort: true)) == .answer(.keyPackagesStored(stored)))
        #expect(flow.stored(.done(pool: 2, lastResort: true, addable: true)) == .answerAndAnnounce(.keyPackagesStored(stored)),
                "a device's first packages: its user's circle and devices are told")
        guard case .refuse(.keyPackagesFull, _) = flow.stored(.full(pool: 100)) else { Issue.record("not full"); return }
    }

    @Test func aFetchAnswersTheDirectoryAndAClaimLeavesTheAskingDeviceOut() throws {
        let signer = try KeyFixtures.deviceSigner()
        let certificate = try alice.certificate("phone", signer)
        var request = Simp_KeyDirectoryRequest()
        request.user = "alice"
        let fetch = try makeFlow(.keyDirectory(request))
        var entry = Simp_KeyDirectoryEntry()
        entry.user = "alice"
        entry.identityKey = Data(alice.identityKey)
        entry.identitySince = 5
        entry.devices = [certificate]
        #expect(fetch.read(directory(["phone": certificate])) == .answer(.keyDirectoryEntry(entry)))
        // Revoked certificates as stored, oldest first; one of another length left out.
        let revoked = try alice.certificate("laptop", try KeyFixtures.deviceSigner())
        var withRevoked = directory(["phone": certificate])
        withRevoked.revokedCertificates = [("laptop", Array(revoked.deviceKey) + Array(revoked.signature)), ("tablet", [1, 2])]
        entry.revokedDevices = [revoked]
        #expect(fetch.read(withRevoked) == .answer(.keyDirectoryEntry(entry)))
        guard case .refuse(.unknownUser, _) = fetch.read(KeyFlow.Directory(userExists: false)) else { Issue.record("not UNKNOWN_USER"); return }

        var claim = Simp_ClaimKeyPackages()
        claim.user = "alice"
        #expect(try makeFlow(.claimKeyPackages(claim), device: "phone").start() == .claim(user: "alice", except: "phone", claimer: "alice", perHour: .max),
                "a user's own devices: no rights to read, no bound")
        claim.user = "bob"
        let other = try makeFlow(.claimKeyPackages(claim))
        #expect(other.start() == .readClaimRights(user: "bob", claimer: "alice"))
        // Another user's packages: as bob's settings say, and bounded per hour.
        let bounded = KeyFlow.Next.claim(user: "bob", except: "", claimer: "alice", perHour: KeyDirectoryRules.oneTimeClaimsPerHour)
        #expect(other.claimRights(.init()) == bounded)
        #expect(other.claimRights(.init(contactsOnlyStranger: true, shareAGroup: true)) == bounded, "a fellow group member")
        for refused in [KeyFlow.ClaimRights(blocked: true), .init(blocked: true, shareAGroup: true), .init(contactsOnlyStranger: true)] {
            guard case .refuse(.notAContact, _) = other.claimRights(refused) else { Issue.record("\(refused) is not NOT_A_CONTACT"); continue }
        }
        guard case .refuse(.unknownUser, _) = other.claimRights(.init(userExists: false)) else { Issue.record("not UNKNOWN_USER"); return }
        guard case .answer(.claimedKeyPackages(let answer)) = other.claimed([("tablet", [2], true), ("laptop", [1], false)]) else {
            Issue.record("no answer"); return
        }
        #expect(answer.packages.map(\.device) == ["laptop", "tablet"] && answer.packages.map(\.lastResort) == [false, true])
    }

    // MARK: the control machine and pricing

    @Test func theMachineNeedsALoginChecksFirstAndHandsTheFlowTheLoginsDeviceAndTime() throws {
        var connection = ControlMachineTests.Connection(ControlMachineTests.node())
        var claim = Simp_ClaimKeyPackages()
        claim.user = "bob"
        #expect(connection.frame(.claimKeyPackages(claim)) == ["send #1 error not_authenticated"])
        connection.logIn("alice", device: "phone")
        #expect(connection.frame(upload([])) == ["send #1 error bad_request"], "refused before any work")
        #expect(connection.frame(.keyPackagesStored(Simp_KeyPackagesStored())) == ["send #1 error bad_request"], "an answer is no request")
        let actions = connection.raw(.frame(Simp_Envelope(requestID: 4, .claimKeyPackages(claim))))
        guard case .run(.keys(let id, let flow))? = actions.last else { Issue.record("no key work: \(actions.map(ControlMachineTests.line))"); return }
        #expect(id == 4 && flow.user == "alice" && flow.device == "phone" && flow.nowMillis == connection.at.millis)
        #expect(flow.request == .claim(user: "bob"))
    }

    @Test func keyRequestsAreChargedByTheirWork() {
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, upload(Array(repeating: [1], count: 32), lastResort: [1]))) == 2 + 2 * 33)
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, upload(Array(repeating: [1], count: 500)))) == 2 + 2 * 32, "clamped: refused anyway")
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, .claimKeyPackages(Simp_ClaimKeyPackages()))) == RequestCost.keyClaim)
        #expect(RequestCost.of(Simp_Envelope(requestID: 1, .publishDevice(Simp_PublishDevice()))) == RequestCost.keyPublish)
    }
}
