import SIMPCore

/// What a control request makes the node do, in request units (a ping is 1): what the gate and
/// the user's budget charge it before it runs, so a stream of cheap-looking frames that each
/// cause much work is paced by that work, not by its count (docs/SECURITY.md, "Limits").
enum RequestCost {
    /// Missing seqs a receipt may name; more are ignored.
    static let missingPerReceipt = 64
    /// Missing seqs per unit of a receipt: each may be a datagram resent or an inbox entry read.
    static let missingPerUnit = 4
    /// History rows per unit.
    static let rowsPerUnit = 100
    /// Login and registration: a password hash (scrypt) and Redis round trips.
    static let passwordHash = 16
    /// CONNECT: the numbering check, the confirmed mark's read and the presence write.
    static let connect = 4
    /// A withdraw, and the reads of a delivery query or a presence request before their items:
    /// a Redis read each.
    static let redisRead = 2
    /// A group's membership change: the group's script and its entry. Each user it names
    /// costs `perGroupUser` more: an existence check, and a copy into their inbox.
    static let groupChange = 16
    static let perGroupUser = 2
    /// Per item of a delivery query: a ZSCORE and a GET.
    static let perQueryItem = 1
    /// A contact request's steps: one script call on each side, and a notice stored.
    static let contactChange = 6
    /// The key directory: a publish is a signature check and a script; an upload, two signature
    /// checks per KeyPackage (the leaf's and the package's) and a script; a claim, a script
    /// over the user's devices.
    static let keyPublish = 4
    static let perKeyPackage = 2
    static let keyClaim = 8
    /// A commit: a read of the submitter's certificate (and the peer) and a script; each
    /// device it adds adds a read (its certificate) and a write (its Welcome's epoch). A fetch:
    /// a script that reads up to a page of commits.
    static let commitSubmit = 4
    static let perAddedDevice = 2
    /// And a unit per 4 KiB of the commit and its Welcome together (stored, replicated, and
    /// handed out again with every page): at most 16 within the frame limit.
    static let commitBytesPerUnit = 4_096
    static let commitFetch = 4

    /// The groups a read request's marks name (each checked by a script in its slot).
    static func groupsNamed(by request: Simp_ReadRequest) -> Int {
        var groups = Set<String>()
        for mark in request.reads where !mark.group.isEmpty { groups.insert(mark.group) }
        return groups.count
    }

    static func of(_ envelope: Simp_Envelope) -> Int {
        switch envelope.body {
        case .receipt(let receipt):
            1 + min(receipt.missing.count, missingPerReceipt) / missingPerUnit
        case .history(let request):
            1 + Int(min(max(request.limit, 1), 1000)) / rowsPerUnit
        case .login, .register: passwordHash
        // The old password checked, the new one hashed.
        case .changePassword: 2 * passwordHash
        case .connect: connect
        case .query(let query): redisRead + perQueryItem * query.messages.count
        case .withdraw: redisRead
        case .logout(let request): request.all ? redisRead : 1
        case .groupRequest(let request):
            request.action == .list || request.action == .members ? redisRead : groupChange + perGroupUser * request.users.count
        // Up to four script calls and a notice stored.
        case .contactRequest(let request): request.action == .list ? redisRead : contactChange
        case .settingsRequest: redisRead
        // The user's contacts and groups; the groups' members and each one's presence are
        // charged once read (`presenceRead`).
        case .presence: redisRead
        // A script over the marks, a read per sender, and up to two notices per sender (and
        // conversation); a group's marks are checked in the group's slot too: a script per group.
        case .markRead(let request): redisRead + request.reads.count / 16 + groupsNamed(by: request)
        case .publishIdentity, .publishDevice: keyPublish
        case .uploadKeyPackages(let upload):
            redisRead + perKeyPackage * (min(upload.keyPackages.count, KeyDirectoryRules.maxKeyPackagesPerUpload) + (upload.lastResort.isEmpty ? 0 : 1))
        case .keyDirectory: redisRead
        case .claimKeyPackages: keyClaim
        case .submitCommit(let submit):
            // The per-device `welcomes` of the migration window: one Welcome once, as `welcome`.
            commitSubmit + perAddedDevice * min(submit.added.count + submit.welcomes.count, CommitRules.maxAddedDevices)
                + (submit.commit.count + max(submit.welcome.count, submit.welcomes.first?.welcome.count ?? 0) + submit.groupInfo.count)
                / commitBytesPerUnit
        case .fetchCommits: commitFetch
        // A script over one user's links, or a read of them.
        case .linkStep, .linkFetch: redisRead
        default: 1
        }
    }

    /// What a presence read cost beyond its first read: a member list per group, and a script
    /// per user whose presence was read (or to whom an announcement went).
    static func presenceRead(groups: Int, users: Int) -> Int {
        groups + users
    }

    /// The KEYS_CHANGED notices of a key change: a copy into each recipient's inbox, as a
    /// group's (`perGroupUser`).
    static func keysNotices(recipients: Int) -> Int {
        perGroupUser * recipients
    }
}
