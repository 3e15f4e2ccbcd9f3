import SIMPCore

/// Every Redis key SIMP uses, under one namespace prefix (default "simp"). A user's keys carry
/// the user's name as a hash tag (`simp:{bob}:inbox`): on a Redis Cluster they share one hash
/// slot, so every script touches keys of one slot only (a store or an acknowledgement is one
/// recipient's keys; a login, one name's).
struct Keys: Sendable {
    let prefix: String

    /// `PREFIX:{NAME}:WHAT`.
    func of(_ name: String, _ what: String) -> String { "\(prefix):{\(name)}:\(what)" }

    /// The user a key of `of(_:_:)` belongs to (for keys found by SCAN).
    func owner(of key: String) -> String? {
        guard key.hasPrefix(prefix + ":{"), let close = key.firstIndex(of: "}") else { return nil }
        return String(key[key.index(key.startIndex, offsetBy: prefix.count + 2)..<close])
    }

    func user(_ name: String) -> String { of(name, "user") }
    func seq(_ name: String) -> String { of(name, "seq") }
    func inbox(_ name: String) -> String { of(name, "inbox") }
    /// The delivered mark: the highest device mark of NAME. The key keeps its old name, `acked`.
    func deliveredMark(_ name: String) -> String { of(name, "acked") }
    /// Redis' run id at NAME's last store, and the seq numbering restarted from while no
    /// CONNECT of NAME has checked it (`Scripts.store`).
    func numbering(_ name: String) -> String { of(name, "numbering") }
    /// Where each connected device of NAME is: field DEVICE, value `PresenceEntry` text.
    func presence(_ name: String) -> String { of(name, "presence") }
    /// NAME's devices: field DEVICE, value the ms of its last CONNECT or disconnect.
    func devices(_ name: String) -> String { of(name, "devices") }
    /// Each device mark of NAME (field DEVICE, value the highest seq it confirmed); the
    /// delivered mark (`deliveredMark`) is their highest. The key keeps its old name, `cursors`.
    func deviceMarks(_ name: String) -> String { of(name, "cursors") }
    /// When NAME's DEVICE was last revoked (ms): tokens issued before it open no session for that
    /// device. One key per device, expiring with the longest token lifetime, so revocations
    /// stay bounded and a revoke or a check touches one key. (`revoked`, a hash of every
    /// device's revocation, was its earlier form: the revoke script deletes it.)
    func revokedDevice(_ name: String, _ device: String) -> String { of(name, "revoked:\(device)") }
    func revokedDevicesBefore(_ name: String) -> String { of(name, "revoked") }
    /// The ids of the messages one sender stored in one recipient's inbox, scored by their
    /// seq: a retransmitted datagram is stored once, the sender's share of the inbox is
    /// counted, and a delivery query is answered only to the message's sender.
    func messageIDs(to: String, from: String) -> String { of(to, "mids:\(from)") }
    /// OWNER's copy of the conversation with PEER (both directions): the store script writes
    /// the recipient's copy, a command after it the sender's (each in its owner's slot).
    func history(of owner: String, with peer: String) -> String { of(owner, "hist:\(peer)") }
    /// A group's keys carry `#NAME` as their hash tag (no user name has a '#'): one slot per
    /// group. Its members (field USER, value the role), its sequence, its log (the entries
    /// scored by their place in its order) and the ids each sender stored in it.
    func groupMembers(_ group: String) -> String { of(GroupName.address(group), "members") }
    func groupSeq(_ group: String) -> String { of(GroupName.address(group), "seq") }
    func groupLog(_ group: String) -> String { of(GroupName.address(group), "log") }
    func groupIDs(_ group: String, from: String) -> String { of(GroupName.address(group), "mids:\(from)") }
    /// Each user's latest removal from the group (or leave): field USER, value its place.
    func groupRemovals(_ group: String) -> String { of(GroupName.address(group), "removed") }
    /// Per member, the place of the entry that last added them: their history starts there.
    func groupJoins(_ group: String) -> String { of(GroupName.address(group), "joined") }
    /// The users invited to the group and not yet answering: field USER, value "BY EXPIRES"
    /// (who invited them, and when it lapses, ms).
    func groupInvited(_ group: String) -> String { of(GroupName.address(group), "invited") }
    /// The invitations waiting for NAME's answer: field GROUP, value "BY EXPIRES" (a copy of
    /// the group's record, for listing; the group's own record is what an accept checks).
    func invitations(_ name: String) -> String { of(name, "invitations") }
    /// The group copies in NAME's inbox (members and scores their seqs; those at or below the
    /// confirmed mark are dead, trimmed when copies are made): group copies are bounded apart
    /// from one-to-one messages (`Scripts.groupDeliver`, `Scripts.store`).
    func groupCopies(_ name: String) -> String { of(name, "gcopies") }
    /// The seq from which NAME's group copies are recorded in `gcopies`: recorded only while
    /// NAME's inbox is deep, absent otherwise (`Scripts.groupDeliver`).
    func groupCopiesSince(_ name: String) -> String { of(name, "gsince") }
    /// The groups whose copies to NAME are held (NAME has its bound of group copies
    /// unconfirmed), a string of names each followed by a space: resumed from the group's log
    /// when NAME confirms (`Scripts.receipt`). A string, so the scripts that read it read it in the
    /// MGET they run anyway. (Until issue 46's last change it was the set `held`; a set left by
    /// a node of then is read by nobody: its groups go on at their next message.)
    func heldGroups(_ name: String) -> String { of(name, "holds") }
    /// "1" while NAME blocks anyone, "0" while it blocks nobody, absent until a script needs it
    /// (`Scripts.groupDeliver` sets it from the set): read with the marks, so a copy to a
    /// member who blocks nobody asks nothing more (`Scripts.contact` keeps it).
    func blocking(_ name: String) -> String { of(name, "blocking") }
    /// NAME's groups: field GROUP, value "MARK IN" (`Scripts.groupDeliver`).
    func groups(_ name: String) -> String { of(name, "groups") }
    /// NAME's contacts and requests: field USER, value "contact", "sent" (NAME asked USER) or
    /// "received" (USER asked NAME). Each side keeps its own record (`Scripts.contact`).
    func contacts(_ name: String) -> String { of(name, "contacts") }
    /// The users NAME blocked: nothing they send is stored for NAME.
    func blocked(_ name: String) -> String { of(name, "blocked") }
    /// The users NAME has an encrypted one-to-one conversation with (a commit of theirs was
    /// stored; at most `CommitRules.maxRememberedPeers`): told of NAME's key changes as its
    /// circle is, contacts or not (`Scripts.rememberPeer`).
    func directPeers(_ name: String) -> String { of(name, "peers") }
    /// NAME's settings (`UserSettings`): field the setting's name, value its value.
    func settings(_ name: String) -> String { of(name, "settings") }
    /// Contact requests NAME made in the current window (`--contact-requests-per-hour`).
    func contactRequests(_ name: String) -> String { of(name, "contactreqs") }
    /// NAME's identity key (docs/E2EE.md, Part 2): field `key` (32 bytes), field `since` (ms).
    func identity(_ name: String) -> String { of(name, "identity") }
    /// NAME's device certificates: field DEVICE, value the device key (32 bytes) and the
    /// identity's signature over it (64 bytes).
    func deviceCertificates(_ name: String) -> String { of(name, "devcerts") }
    /// NAME's revoked device certificates (`Scripts.keepRevokedCertificate`): member "DEVICE\0"
    /// followed by the 96 bytes of `deviceCertificates`' value, scored by when it was revoked (ms).
    func revokedCertificates(_ name: String) -> String { of(name, "revokedcerts") }
    /// NAME's one-time KeyPackages, every device's in one sorted set (all scores 0): member
    /// "DEVICE\0PACKAGE", so a device's are one lexicographic range (`Scripts.claimKeyPackages`).
    func keyPackages(_ name: String) -> String { of(name, "keypkgs") }
    /// NAME's last-resort KeyPackages: field DEVICE, value the package.
    func lastResortKeyPackages(_ name: String) -> String { of(name, "lastresort") }
    /// NAME's device links (docs/E2EE.md, "Linking a device"; `Scripts.linkStep`): field
    /// "DEVICE\0PART" for each part of the link of the new device DEVICE.
    func links(_ name: String) -> String { of(name, "links") }
    /// How many of NAME's one-time KeyPackages CLAIMER took this hour (expires an hour after
    /// the first; `KeyDirectoryRules.oneTimeClaimsPerHour`).
    func claims(of name: String, by claimer: String) -> String { of(name, "claims:\(claimer)") }
    /// A conversation's MLS commits (docs/E2EE.md, Part 3), under its tag
    /// (`CommitConversation.tag`: a group's keys share it, so a commit script sees the members):
    /// its epoch (the commits stored), its last commits (field EPOCH, value a `StoredCommit`) and
    /// the Welcomes its commits released: each once (field EPOCH, the epoch it joins at, value a
    /// `StoredWelcome`), and for each device its latest Welcome's epoch (field USER/DEVICE; a value
    /// "EPOCH:" and the device's own `StoredWelcome` was kept before one Welcome per commit).
    func commitEpoch(_ conversation: CommitConversation) -> String { of(conversation.tag, "epoch") }
    func commits(_ conversation: CommitConversation) -> String { of(conversation.tag, "commits") }
    func welcomes(_ conversation: CommitConversation) -> String { of(conversation.tag, "welcomes") }
    /// The devices' Welcomes by epoch (member USER/DEVICE, score its Welcome's epoch), to drop
    /// the old ones.
    func welcomeEpochs(_ conversation: CommitConversation) -> String { of(conversation.tag, "welcomeEpochs") }
    /// The MLS group id its commits are framed for: the first stored commit's (docs/E2EE.md, Part 3).
    func commitGroup(_ conversation: CommitConversation) -> String { of(conversation.tag, "group") }
    /// The latest GroupInfo its commits carried (field `epoch`, the epoch it describes; field
    /// `info`, a `StoredGroupInfo`), for a device rejoining by external commit (docs/E2EE.md, Part 8).
    func groupInfo(_ conversation: CommitConversation) -> String { of(conversation.tag, "groupInfo") }
    var secret: String { "\(prefix):secret" }
    /// A running node's claim on its id (`NodeRecord`): its instance token, expiring unless renewed.
    func node(_ id: String) -> String { "\(prefix):node:\(id)" }
    /// The pub/sub channel of one node: what other nodes tell it (`NodeNotice`).
    func nodeChannel(_ node: String) -> String { "\(prefix):to-node:\(node)" }
    /// The pub/sub channel every node listens on for administrators' requests (`simp-admin`).
    var adminChannel: String { "\(prefix):admin" }
    /// Failed logins for a name (existing or not), from all sources or (a name has no ':') from
    /// one source address, and the wait they earned (docs/SECURITY.md).
    func loginFailures(_ name: String, from source: String? = nil) -> String {
        of(name, "loginfail" + (source.map { ":\($0)" } ?? ""))
    }
    func loginLock(_ name: String, from source: String? = nil) -> String {
        of(name, "loginlock" + (source.map { ":\($0)" } ?? ""))
    }
    /// Failed logins from one source address across all names, and the wait they earned.
    func sourceFailures(_ source: String) -> String { "\(prefix):loginfailip:\(source)" }
    func sourceLock(_ source: String) -> String { "\(prefix):loginlockip:\(source)" }
    /// The source addresses a user logged in from successfully, scored by the time of the last one.
    func knownSources(_ name: String) -> String { of(name, "knownips") }
    /// Registrations attempted from one source address in the current window.
    func registrations(_ source: String) -> String { "\(prefix):regs:\(source)" }
    /// A token revoked by logout, by its MAC; expires with the token.
    func revoked(_ tokenID: String) -> String { "\(prefix):revoked:\(tokenID)" }
}
