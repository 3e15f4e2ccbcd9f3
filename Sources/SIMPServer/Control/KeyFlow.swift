import Foundation
import SIMPCore

/// A key directory request, step by step (docs/E2EE.md, Part 2): what to read, what the read
/// leads to (the certificate and KeyPackage checks, pure), what to store, and what the user is
/// answered. The worker carries each step out and feeds its result back; the time is the
/// request's, passed in. A store step names what the check relied on (the identity key, the
/// device's certificate), and the store refuses it if that changed meanwhile (`KEYS_CHANGED`).
struct KeyFlow: Sendable {
    enum Request: Sendable, Equatable {
        case publishIdentity(key: [UInt8], replace: Bool)
        case publishDevice(UnverifiedDeviceCertificate)
        case upload(packages: [UncheckedKeyPackage], lastResort: UncheckedKeyPackage?)
        case fetch(user: String)
        case claim(user: String)
    }

    /// What a read of one user's directory found.
    struct Directory: Sendable, Equatable {
        var userExists: Bool
        var identity: [UInt8]?
        var identitySince: Int64 = 0
        /// By device: the device key (32 bytes) followed by the identity's signature (64).
        var certificates: [String: [UInt8]] = [:]
        /// Certificates since revoked or replaced (`Keys.revokedCertificates`), oldest first.
        var revokedCertificates: [(device: String, certificate: [UInt8])] = []

        static func == (a: Directory, b: Directory) -> Bool {
            a.userExists == b.userExists && a.identity == b.identity && a.identitySince == b.identitySince
                && a.certificates == b.certificates
                && a.revokedCertificates.map(\.device) == b.revokedCertificates.map(\.device)
                && a.revokedCertificates.map(\.certificate) == b.revokedCertificates.map(\.certificate)
        }
    }

    enum Next: Sendable, Equatable {
        /// Read `user`'s identity and certificates; comes back as `read(_:)`.
        case read(user: String)
        /// Come back as `stored(_:)` with the script's status.
        case storeIdentity(user: String, key: [UInt8], replace: Bool, millis: Int64)
        case storeCertificate(user: String, device: String, certificate: [UInt8], identity: [UInt8], maxDevices: Int, millis: Int64)
        case storePackages(user: String, device: String, certificate: [UInt8], packages: [[UInt8]], lastResort: [UInt8]?, maxPool: Int)
        /// Read whether `claimer` may claim `user`'s KeyPackages; comes back as `claimRights(_:)`.
        case readClaimRights(user: String, claimer: String)
        /// Take one KeyPackage per device of `user` other than `except`, one-time ones only while
        /// `claimer` has claimed fewer than `perHour` this hour; comes back as `claimed(_:)`.
        case claim(user: String, except: String, claimer: String, perHour: Int)
        case answer(Simp_Envelope.OneOf_Body)
        /// Answer, and tell the user's circle and its own devices that its key directory changed.
        case answerAndAnnounce(Simp_Envelope.OneOf_Body)
        case refuse(Simp_ErrorCode, String)
    }

    /// Whether a claimer may have a user's KeyPackages, as the user's settings say.
    struct ClaimRights: Sendable, Equatable {
        var userExists = true
        /// The user blocked the claimer.
        var blocked = false
        /// The user takes messages from contacts only, and the claimer is not one.
        var contactsOnlyStranger = false
        /// The two are members of one group (whose members must encrypt to each other).
        var shareAGroup = false
    }

    /// What a store step's script answered.
    enum Stored: Sendable, Equatable {
        /// `addable`: the upload stored the device's first last-resort KeyPackage (a device just
        /// certified: others can add it now; once per certificate).
        case done(pool: Int, lastResort: Bool, addable: Bool = false)
        /// The identity or certificate the check relied on is not the one stored any more.
        case changed
        case identityExists
        case full(pool: Int)
        case tooManyDevices
    }

    let request: Request
    let user: String
    let device: String
    let nowMillis: Int64
    let maxDevices: Int

    init(_ request: Request, user: String, device: String, nowMillis: Int64, maxDevices: Int) {
        self.request = request
        self.user = user
        self.device = device
        self.nowMillis = nowMillis
        self.maxDevices = maxDevices
    }

    /// The request as the flow takes it, or why it is refused before anything runs: names,
    /// key sizes, counts and sizes (`KeyDirectoryRules`).
    static func request(from body: Simp_Envelope.OneOf_Body) -> Result<Request, FlowRefusal>? {
        switch body {
        case .publishIdentity(let publish):
            guard IdentityKey(Array(publish.identityKey)) != nil else {
                return .failure(.init(.badRequest, "an identity key is an Ed25519 public key of 32 bytes"))
            }
            return .success(.publishIdentity(key: Array(publish.identityKey), replace: publish.replace))
        case .publishDevice(let publish):
            let certificate = publish.certificate
            guard DeviceName.isValid(certificate.device) else { return .failure(.init(.badRequest, "not a device name: \(certificate.device.prefix(32))")) }
            guard certificate.deviceKey.count == 32, certificate.signature.count == 64 else {
                return .failure(.init(.badRequest, "a device certificate holds a 32-byte key and a 64-byte signature"))
            }
            return .success(.publishDevice(UnverifiedDeviceCertificate(user: "", certificate)))
        case .uploadKeyPackages(let upload):
            let limit = KeyDirectoryRules.maxKeyPackagesPerUpload
            guard upload.keyPackages.count <= limit else {
                return .failure(.init(.badRequest, "at most \(limit) KeyPackages in one upload"))
            }
            guard !upload.keyPackages.isEmpty || !upload.lastResort.isEmpty else { return .failure(.init(.badRequest, "no KeyPackage in the upload")) }
            let all = upload.keyPackages + (upload.lastResort.isEmpty ? [] : [upload.lastResort])
            guard all.allSatisfy({ !$0.isEmpty && $0.count <= KeyDirectoryRules.maxKeyPackageBytes }) else {
                return .failure(.init(.badRequest, "a KeyPackage is 1-\(KeyDirectoryRules.maxKeyPackageBytes) bytes"))
            }
            // The same package twice is one package.
            var seen = Set<Data>()
            let packages = upload.keyPackages.filter { seen.insert($0).inserted }.map { UncheckedKeyPackage(bytes: Array($0)) }
            return .success(.upload(packages: packages, lastResort: upload.lastResort.isEmpty ? nil : UncheckedKeyPackage(bytes: Array(upload.lastResort))))
        case .keyDirectory(let request):
            guard UserName.isValid(request.user) else { return .failure(.init(.unknownUser, "no such user: \(request.user.prefix(32))")) }
            return .success(.fetch(user: request.user))
        case .claimKeyPackages(let request):
            guard UserName.isValid(request.user) else { return .failure(.init(.unknownUser, "no such user: \(request.user.prefix(32))")) }
            return .success(.claim(user: request.user))
        default: return nil
        }
    }

    /// The first step.
    func start() -> Next {
        switch request {
        case .publishIdentity(let key, let replace): .storeIdentity(user: user, key: key, replace: replace, millis: nowMillis)
        case .publishDevice, .upload: .read(user: user)
        case .fetch(let target): .read(user: target)
        case .claim(let target) where target == user:
            .claim(user: target, except: device, claimer: user, perHour: .max)
        case .claim(let target): .readClaimRights(user: target, claimer: user)
        }
    }

    /// A claim of another user's KeyPackages, once the rights are read: refused (as if the
    /// user had no device) when the user blocked the claimer, or takes contacts only and the
    /// claimer is neither a contact nor in a group with it (docs/E2EE.md, "Who may claim").
    func claimRights(_ rights: ClaimRights) -> Next {
        guard case .claim(let target) = request else { return .refuse(.internal, "not a claim") }
        guard rights.userExists else { return .refuse(.unknownUser, "no such user: \(target)") }
        if rights.blocked || (rights.contactsOnlyStranger && !rights.shareAGroup) {
            return .refuse(.notAContact, "\(target) takes messages from contacts only: no keys for you")
        }
        return .claim(user: target, except: "", claimer: user, perHour: KeyDirectoryRules.oneTimeClaimsPerHour)
    }

    /// A stored certificate (key and signature, 96 bytes) as the wire carries it; nil if it is
    /// not 96 bytes.
    private static func certificate(_ device: String, _ stored: [UInt8]) -> Simp_DeviceCertificate? {
        guard stored.count == 96 else { return nil }
        var certificate = Simp_DeviceCertificate()
        certificate.device = device
        certificate.deviceKey = Data(stored[0..<32])
        certificate.signature = Data(stored[32..<96])
        return certificate
    }

    /// A read step's result.
    func read(_ directory: Directory) -> Next {
        switch request {
        case .fetch(let target):
            guard directory.userExists else { return .refuse(.unknownUser, "no such user: \(target)") }
            guard let identity = directory.identity else { return .refuse(.noIdentity, "\(target) has published no identity key") }
            var entry = Simp_KeyDirectoryEntry()
            entry.user = target
            entry.identityKey = Data(identity)
            entry.identitySince = directory.identitySince
            entry.devices = directory.certificates.keys.sorted().compactMap { name in
                directory.certificates[name].flatMap { Self.certificate(name, $0) }
            }
            entry.revokedDevices = directory.revokedCertificates.compactMap { Self.certificate($0.device, $0.certificate) }
            return .answer(.keyDirectoryEntry(entry))
        case .publishDevice(var certificate):
            guard let stored = directory.identity, let identity = IdentityKey(stored) else {
                return .refuse(.noIdentity, "publish your identity key first")
            }
            certificate.user = user
            let checked: DeviceCertificate
            do throws(UnverifiedDeviceCertificate.Problem) {
                checked = try certificate.verified(by: identity)
            } catch {
                guard error == .badSignature else { return .refuse(.badRequest, error.description) }
                return .refuse(.badSignature, "the certificate of \(certificate.device) does not verify under your identity key")
            }
            return .storeCertificate(user: user, device: checked.device, certificate: checked.deviceKey + checked.signature,
                                     identity: stored, maxDevices: maxDevices, millis: nowMillis)
        case .upload(let packages, let lastResort):
            guard directory.identity != nil else { return .refuse(.noIdentity, "publish your identity key first") }
            guard let certificate = directory.certificates[device], certificate.count == 96 else {
                return .refuse(.deviceNotCertified, "\(device) has no device certificate stored: publish one first")
            }
            let key = Array(certificate[0..<32])
            let seconds = UInt64(max(0, nowMillis / 1000))
            var checked: [[UInt8]] = []
            do throws(UncheckedKeyPackage.Problem) {
                for package in packages {
                    checked.append(try package.checked(user: user, device: device, certifiedKey: key, nowSeconds: seconds).bytes)
                }
                var last: [UInt8]?
                if let lastResort { last = try lastResort.checked(user: user, device: device, certifiedKey: key, nowSeconds: seconds).bytes }
                return .storePackages(user: user, device: device, certificate: certificate, packages: checked, lastResort: last,
                                      maxPool: KeyDirectoryRules.maxPoolPerDevice)
            } catch {
                return .refuse(error.code, error.reason)
            }
        case .publishIdentity, .claim:
            return .refuse(.internal, "key request read nothing")
        }
    }

    /// A store step's result.
    func stored(_ result: Stored) -> Next {
        switch result {
        case .changed: return .refuse(.keysChanged, "your identity or device certificate changed meanwhile: read it again and retry")
        case .identityExists:
            return .refuse(.identityExists, "an identity key is stored already; publishing another is a new identity (replace)")
        case .full(let pool):
            return .refuse(.keyPackagesFull, "\(device) holds \(pool) KeyPackages; at most \(KeyDirectoryRules.maxPoolPerDevice)")
        case .tooManyDevices: return .refuse(.tooManyDevices, "at most \(maxDevices) device certificates")
        case .done(let pool, let lastResort, let addable):
            guard case .upload = request else { return .answer(.ok(Simp_Ok())) }
            var answer = Simp_KeyPackagesStored()
            answer.pool = UInt32(clamping: pool)
            answer.lastResort = lastResort
            // A device others can add now (a new one, or one under a new identity): the user's
            // circle and its own devices are told (`Router.announceKeys`).
            return addable ? .answerAndAnnounce(.keyPackagesStored(answer)) : .answer(.keyPackagesStored(answer))
        }
    }

    /// A claim step's result: by device, the package and whether it is the last-resort one.
    func claimed(_ packages: [(device: String, bytes: [UInt8], lastResort: Bool)]) -> Next {
        guard case .claim(let target) = request else { return .refuse(.internal, "not a claim") }
        var answer = Simp_ClaimedKeyPackages()
        answer.user = target
        answer.packages = packages.sorted { $0.device < $1.device }.map { claimed in
            var package = Simp_ClaimedKeyPackage()
            package.device = claimed.device
            package.keyPackage = Data(claimed.bytes)
            package.lastResort = claimed.lastResort
            return package
        }
        return .answer(.claimedKeyPackages(answer))
    }
}

/// A request refused before it runs (`KeyFlow`, `CommitFlow`).
struct FlowRefusal: Error, Equatable, Sendable {
    var code: Simp_ErrorCode
    var reason: String

    init(_ code: Simp_ErrorCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }
}
