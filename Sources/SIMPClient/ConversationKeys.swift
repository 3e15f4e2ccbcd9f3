import Crypto
import Foundation
import SIMPCore
import SIMPMLS

/// End-to-end encryption of one-to-one conversations (docs/E2EE.md, Part 4): each is an MLS
/// group (RFC 9420) of both users' devices, made by the first device that sends, through the
/// server's commit order (the first commit for an epoch wins, Part 3); what a user writes
/// travels as an application message of it (section 15) in a SEALED message. Only devices whose
/// certificate verifies under their user's identity key are added or accepted (section 5.3.1:
/// `DirectoryValidator`), and a peer's identity is pinned on first use (`safetyNumber`).
///
/// Every change of a group's state is on disk before it is used: a sealed message's state
/// before the message goes out (its key is never used twice), an opened one's together with what
/// it opened to (a message pushed again after a crash opens from there). Awaits (requests) come
/// before the state is read; a state is read, changed and kept with no await in between, so
/// a seal and an open of one conversation never work on the same state.
actor ConversationKeys {
    static let suite = MLSCipherSuite.x25519AES128GCMSHA256Ed25519
    static let capabilities = Capabilities(versions: [1], cipherSuites: [CipherSuiteID(1)], extensions: [], proposals: [],
                                           credentials: [.basic])
    /// One-time KeyPackages uploaded at a time; a new batch goes up when fewer are kept.
    static let batch = 16
    static let refillBelow = 4
    /// How long an uploaded KeyPackage stays valid (section 7.2): 90 days.
    static let packageLifetime: UInt64 = 90 * 86_400
    /// Application messages of the two epochs before the current one still decrypt: a message
    /// sealed before a commit it had not seen arrives after it (section 12.4.2's late messages).
    static let policy = MLSGroupPolicy(pastEpochsKept: 2)
    /// A device renews its leaf's keys (an Update: a commit with a path, section 12.4) after
    /// this many sealed messages or this long (ms), for post-compromise security (section 16.6).
    static let updateAfterMessages = 1_000
    static let updateAfterMillis: Int64 = 7 * 86_400_000

    let store: ClientStore
    /// The store's `keysGeneration` this device's keys were read at: every write of a group
    /// state, pending commit or KeyPackage is refused once a new device key was kept.
    let generation: Int
    let user: String
    let device: String
    private let signer: SignaturePrivateKey
    private let identityPublic: [UInt8]
    private let randomness: @Sendable (Int) -> [UInt8]
    private var groups: [String: MLSGroup] = [:]
    /// A conversation's group being set up (joined or created), or its members being brought in
    /// line with the key directory: a second caller waits for it.
    private var settingUp: [String: Task<Void, any Error>] = [:]
    private var syncing: [String: Task<Void, any Error>] = [:]
    /// Conversations with a commit of this device's in flight (made, its fate not known yet):
    /// no second one is made on the same epoch meanwhile, which would replace its pending entry.
    private var committing: Set<String> = []
    /// When each conversation's members were last checked against the key directory.
    private var checked: [String: ContinuousClock.Instant] = [:]
    /// Changes of each conversation's members told to this device (`membersChanged`), counted,
    /// and the count the latest member check (`resync`) began at: a check that began before a
    /// change did not read it.
    private var changes: [String: Int] = [:]
    private var checkedFrom: [String: Int] = [:]
    /// How often (`ClientConfiguration.directoryCheckInterval`).
    private let checkInterval: Duration
    /// The wall clock in ms (key lifetimes, when an Update is due); injected by tests.
    private let clock: @Sendable () -> Int64
    private let updateAfter: (messages: Int, millis: Int64)
    /// What this device already warned of (`ClientEvent.uncertifiedDevice`, `.commitRefused`):
    /// each once while the client runs, however often the server hands it again.
    private var warned: Set<[UInt8]> = []
    /// Certificates whose signatures verified, with what they verified to (`verifiedDevices(of:)`).
    private var verifiedCertificates: [CertificateUnder: VerifiedDevice] = [:]
    /// Past this many, the cache starts again (a directory of many users' devices).
    static let verifiedCertificatesKept = 4_096
    /// The devices recorded as seen while the client runs (`recordSeen`).
    private var recordedSeen: Set<ClientStore.SeenDevice> = []
    /// Called after the server stored a commit of this device's, before its state is kept:
    /// tests copy the data directory there, as a `kill -9` at that moment would leave it.
    private var afterCommitStored: (@Sendable (String) -> Void)?

    func setAfterCommitStored(_ hook: (@Sendable (String) -> Void)?) { afterCommitStored = hook }

    /// `generation`: the `keysGeneration` `keys` were read at (`ClientStore.ownKeysAndGeneration`);
    /// the store's current one when nil (tests).
    init(store: ClientStore, user: String, device: String, keys: ClientStore.OwnKeys, generation: Int? = nil,
         checkInterval: Duration = .seconds(1),
         updateAfter: (messages: Int, millis: Int64) = (ConversationKeys.updateAfterMessages, ConversationKeys.updateAfterMillis),
         clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
         randomness: @escaping @Sendable (Int) -> [UInt8] = ConversationKeys.systemRandom) throws(ClientError) {
        guard let signer = try? SignaturePrivateKey(rawRepresentation: keys.deviceKey),
              let identity = try? Curve25519.Signing.PrivateKey(rawRepresentation: keys.identityKey) else {
            throw ClientError("the identity kept in \(store.path) is damaged", code: .endToEnd)
        }
        self.store = store
        self.generation = generation ?? store.keysGeneration.value
        self.user = user
        self.device = device
        self.signer = signer
        identityPublic = Array(identity.publicKey.rawRepresentation)
        self.randomness = randomness
        self.checkInterval = checkInterval
        self.updateAfter = updateAfter
        self.clock = clock
    }

    @Sendable static func systemRandom(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    var credential: Credential { .basic(identity: KeyDirectoryRules.credentialIdentity(user: user, device: device)) }

    // MARK: KeyPackages

    /// Makes and uploads a batch of one-time KeyPackages (and the last-resort one, the first
    /// time) when fewer than `refillBelow` are kept. They are on disk before the server has them:
    /// a Welcome to one can always be opened.
    func refillKeyPackages(_ client: SIMPClient) async throws(ClientError) {
        let kept = try storeCall { try store.keyPackages() }
        let oneTime = kept.filter { !$0.lastResort }.count
        let needsLastResort = !kept.contains { $0.lastResort }
        guard oneTime < Self.refillBelow || needsLastResort else { return }
        let now = UInt64(clock() / 1000)
        let lifetime = Lifetime(notBefore: now - 3_600, notAfter: now + Self.packageLifetime)
        var made: [ClientStore.StoredKeyPackage] = []
        for _ in 0..<(oneTime < Self.refillBelow ? Self.batch : 0) { made.append(try makeKeyPackage(lifetime, lastResort: false)) }
        if needsLastResort { made.append(try makeKeyPackage(lifetime, lastResort: true)) }
        try storeCall { try store.addKeyPackages(made, keys: generation) }
        _ = try await client.uploadKeyPackages(made.filter { !$0.lastResort }.map(\.package),
                                               lastResort: made.first { $0.lastResort }?.package)
    }

    private func makeKeyPackage(_ lifetime: Lifetime, lastResort: Bool) throws(ClientError) -> ClientStore.StoredKeyPackage {
        // The bundle draws its init key's seed, then its leaf encryption key's: kept, they
        // give the private keys back (`bundle(of:)`).
        let seeds = [randomness(Self.suite.hashLength), randomness(Self.suite.hashLength)]
        let next = Locked(0)
        do {
            let bundle = try MLSKeyPackageBundle(
                suite: Self.suite, credential: credential, capabilities: Self.capabilities, lifetime: lifetime, signer: signer,
                randomness: { _ in next.withLock { i in defer { i += 1 }; return seeds[min(i, 1)] } })
            return ClientStore.StoredKeyPackage(
                reference: try bundle.keyPackage.reference(), package: try MLSMessage.keyPackage(bundle.keyPackage.wire).mlsEncoded(),
                initSeed: seeds[0], encryptionSeed: seeds[1], lastResort: lastResort)
        } catch {
            throw ClientError("cannot make a KeyPackage: \(error)", code: .endToEnd)
        }
    }

    private func bundle(of kept: ClientStore.StoredKeyPackage) throws -> MLSKeyPackageBundle {
        guard case .keyPackage(let wire) = try MLSMessage(mlsDecoding: kept.package) else { throw MLSGroupError.keyPackageKeysMismatch }
        return try MLSKeyPackageBundle(
            keyPackage: try wire.validate(suite: Self.suite), initPrivateKey: try Self.suite.deriveHPKEKeyPair(ikm: kept.initSeed),
            encryptionPrivateKey: try Self.suite.deriveHPKEKeyPair(ikm: kept.encryptionSeed), signer: signer)
    }

    // MARK: sealing

    /// `items` (to `peer`) sealed: each one's type, text and image in an application message of
    /// the conversation's group, made first if there is none. Returns once the group's state is
    /// on disk.
    func seal(_ items: [Outgoing], to peer: String, client: SIMPClient) async throws(ClientError) -> [Outgoing] {
        let (sealed, state) = try await sealQueued(items, to: peer, client: client)
        do {
            try await store.written(state)
        } catch {
            throw ClientError("cannot use the keys in \(store.path): \(error)", code: .endToEnd)
        }
        return sealed
    }

    /// `seal` whose state write is queued, not awaited: for a caller that writes the sealed
    /// messages to the outbox next, resting on it (`ClientStore.add(after:)`), so that both go in
    /// one batch and one commit. Nothing sealed may leave the device before that state is on disk.
    func sealQueued(_ items: [Outgoing], to peer: String,
                    client: SIMPClient) async throws(ClientError) -> ([Outgoing], ClientStore.QueuedWrite) {
        if GroupName.addressed(by: peer) == nil, try storeCall({ try store.isHeld(peer: peer) }) {
            throw ClientError("\(peer)'s identity changed since you verified it: compare the new safety number "
                              + "(/verify \(peer)) before sending to them", code: .identityChanged)
        }
        try await setUp(peer, client: client, creating: true)
        try await syncMembers(peer, client: client)
        try await updateIfDue(peer, client: client)
        // A group's reads are generations its other members never see: past what they can jump
        // (an Update was due and could not be made), none is sealed (docs/E2EE.md, Part 7).
        if GroupName.addressed(by: peer) != nil, items.allSatisfy({ $0.message.type == .read }),
           let renewal = try storeCall({ try store.renewal(of: peer) }),
           !SignalRules.groupReadsFit(items.count, sealedSinceUpdate: renewal.sealed,
                                      maximumForwardDistance: RatchetWindow.default.maximumForwardDistance) {
            throw ClientError("reads in \(peer) wait for this device's Update (\(renewal.sealed) messages sealed since the last)",
                              code: .endToEnd)
        }
        guard var group = groups[peer] else { throw ClientError("no encrypted conversation \(Self.named(peer))", code: .endToEnd) }
        var sealed: [Outgoing] = []
        do {
            for item in items { sealed.append(try Self.sealed(item, in: &group, randomness: randomness)) }
        } catch {
            throw ClientError("cannot encrypt \(Self.named(peer)): \(error)", code: .endToEnd)
        }
        // Before the state is kept: a message the server would refuse uses no key.
        guard sealed.allSatisfy({ ((try? $0.message.serializedBytes()) as [UInt8]?)?.count ?? .max <= MessageRules.maxMessageBytes }) else {
            throw ClientError("the sealed message is over \(MessageRules.maxMessageBytes) bytes (a long id or image URL?)", code: .messageTooLarge)
        }
        let state: [UInt8]
        do { state = try group.savedState() } catch { throw ClientError("cannot encrypt \(Self.named(peer)): \(error)", code: .endToEnd) }
        // Kept in memory as the write is queued: a seal that comes meanwhile goes on from this
        // state, never reuses its keys. Should the write fail, these messages are not sent
        // (what rests on it fails) and their keys are simply skipped.
        groups[peer] = group
        return (sealed, store.queueSealed(peer, state: state, sealed: sealed.count, keys: generation))
    }

    /// One message sealed in `group` (docs/PROTOCOL.md, Sealed messages): its id, type, text and
    /// image in the application data, padded with its length and signature to a multiple of
    /// `SealedText.paddingBlock`; the outer message keeps only the id and addressing.
    static func sealed(_ item: Outgoing, in group: inout MLSGroup, randomness: (Int) throws -> [UInt8]) throws -> Outgoing {
        var inner = Simp_Message()
        inner.messageID = item.message.messageID
        inner.type = item.message.type
        inner.content = item.message.content
        inner.imageURL = item.message.imageURL
        inner.imageScale = item.message.imageScale
        let data: [UInt8] = try inner.serializedBytes()
        // 67: the data's length (2 bytes) and the signature (65) go in the padded content too.
        let message = try group.encrypt(data, paddingLength: SealedText.padding(for: data.count + 67), randomness: randomness)
        var outer = item.message
        // A read receipt goes as SEALED_READ (docs/E2EE.md, Part 7): the server keeps it out of
        // the history and applies the recipient's read-receipts setting; what was read is inside.
        outer.type = item.message.type == .read ? .sealedRead : .sealed
        outer.content = Data(try MLSMessage.privateMessage(message).mlsEncoded()).base64EncodedString()
        outer.imageURL = ""
        outer.imageScale = 0
        return Outgoing(to: item.to, message: outer)
    }

    // MARK: opening

    /// Why a sealed message did not open.
    enum OpenFailure: Error, Equatable {
        case malformed
        case notInConversation
        case wrongSender
        case wrongID
        case mls(String)
        /// A commit of the conversation's order that MLS refused (`ClientEvent.commitRefused`).
        case commitRefused(String)
    }

    /// The messages with each sealed one opened; one that cannot be stays sealed, with why
    /// (`IncomingMessage.unopened`). Throws, for the whole batch, when one could not be opened
    /// for now (`openLater`): the batch is then neither written nor confirmed, and the server
    /// pushes it again.
    ///
    /// Each opening's state is queued with what it opened to (`ClientStore.queueOpened`), not
    /// written on its own and not awaited: the caller writes the opened messages next, resting
    /// on `Opening.writes` (`ClientStore.receive(after:)`), in the states' commit when the writer
    /// has not taken them yet, with no wait between; should that write fail, the caller hands
    /// the opening back (`forget`).
    func open(_ messages: [IncomingMessage], client: SIMPClient) async throws(ClientError) -> Opening {
        let writes = OpenedWrites()
        let kept: [UInt64: ClientStore.Opened]
        do { kept = try store.opened(seqs: messages.filter(\.sealed).map(\.seq)) } catch {
            throw ClientError("cannot use the keys in \(store.path): \(error)")
        }
        var opened: [IncomingMessage] = []
        for message in messages {
            guard message.sealed else {
                // A plain READ is taken only where the conversation is not encrypted.
                var plain = message
                if plain.kind == .read, case .drop(let why) = SignalRules.plainReadVerdict(
                    encrypted: isEncrypted(Self.conversation(of: plain, user: user))) {
                    plain.droppedSignal = why
                }
                opened.append(plain)
                continue
            }
            do {
                opened.append(try await open(message, kept: kept[message.seq], writes: writes, client: client))
            } catch {
                if let error = error as? ClientError, Self.openLater(error) {
                    // What opened before it is kept all the same: its keys are gone from memory.
                    try await settle(writes)
                    throw error
                }
                var failed = message
                failed.unopened = Self.reason(error)
                failed.unopenedCause = Self.cause(error)
                opened.append(failed)
            }
        }
        return Opening(messages: opened, writes: writes)
    }

    /// A batch opened: its messages, and the group states their openings queued.
    struct Opening: Sendable {
        var messages: [IncomingMessage]
        let writes: OpenedWrites
    }

    /// The writes a batch's openings queued (failed if one did), and the groups they moved on.
    final class OpenedWrites: Sendable {
        let queued = ClientStore.QueuedWrite()
        let touched = Locked<Set<String>>([])
    }

    /// Returns once the batch's queued states are on disk. If one is not, the opening is
    /// forgotten and the batch is to be opened later: neither shown nor confirmed, the server
    /// pushes it again.
    private func settle(_ writes: OpenedWrites) async throws(ClientError) {
        guard !writes.touched.value.isEmpty else { return }
        await store.queuedWritesDone()
        guard let failure = writes.queued.failure.value else { return }
        forget(writes)
        throw ClientError("cannot keep what the messages opened to: \(failure)")
    }

    /// An opening whose states, or the messages written with them, did not reach the disk: the
    /// groups it moved on are dropped from memory, to go on from the state on disk, whose keys
    /// (or `mls_opened`, should the states have been kept) still open these messages when the
    /// server pushes them again.
    func forget(_ writes: OpenedWrites) {
        let touched = writes.touched.value
        for conversation in touched { groups[conversation] = nil }
        store.forgetUnkeptOpenings(of: touched)
    }

    static func cause(_ error: any Error) -> DecryptionFailure {
        switch error {
        case OpenFailure.malformed: .malformed
        case OpenFailure.notInConversation: .notInConversation
        case OpenFailure.wrongSender: .wrongSender
        case OpenFailure.wrongID: .wrongID
        case OpenFailure.mls: .mls
        case OpenFailure.commitRefused: .commitRefused
        case let error as ClientError: error.decryptionFailure ?? .other
        default: .other
        }
    }

    /// A failure to ask rather than an answer: the connection was lost or timed out, or the
    /// server could not reach its store; the same message may open when asked again (a
    /// `kill -9` of Redis or of a node while a device fetched a conversation's commits made
    /// messages undecryptable for good: simp-chaos, seed 2929851673).
    static func openLater(_ error: ClientError) -> Bool {
        if error.isCancelled { return false }
        switch error.code {
        case nil: return true
        case .storeUnavailable?, .replicasUnavailable?, .notConnected?, .rateLimited?, .sessionClosed?, .internalError?: return true
        default: return false
        }
    }

    static func reason(_ error: any Error) -> String {
        switch error {
        case OpenFailure.malformed: "not a well-formed MLS application message"
        case OpenFailure.notInConversation: "this device is not in the conversation's group"
        case OpenFailure.wrongSender: "the sender's device in the group is not the user the server names"
        case OpenFailure.wrongID: "the id inside is not the message's"
        case OpenFailure.mls(let why): "MLS: \(why)"
        case OpenFailure.commitRefused(let why): "the conversation's order holds a commit this device refused: \(why)"
        case let error as ClientError: error.message
        default: "\(error)"
        }
    }

    private func open(_ message: IncomingMessage, kept: ClientStore.Opened?, writes: OpenedWrites,
                      client: SIMPClient) async throws -> IncomingMessage {
        if let kept, kept.id == message.id {
            return try unsealed(message, kept.inner)
        }
        let conversation = Self.conversation(of: message, user: user)
        guard let bytes = SealedText.mlsBytes(of: message.text),
              case .privateMessage(let sealed) = try? MLSMessage(mlsDecoding: bytes) else { throw OpenFailure.malformed }
        try await setUp(conversation, client: client, creating: false)
        if let group = groups[conversation], sealed.epoch > group.epoch { try await catchUp(conversation, client: client) }
        // From here to the end, no await: the state read is the state kept.
        guard var group = groups[conversation] else { throw OpenFailure.notInConversation }
        let received: MLSGroup.Received
        do { received = try group.process(.privateMessage(sealed)) } catch { throw OpenFailure.mls("\(error)") }
        guard case .application(let sender, let data, _, _) = received else { throw OpenFailure.malformed }
        // The server names the sender; the group's leaf must be that user's.
        guard case .basic(let identity)? = group.credential(at: sender),
              identity.starts(with: Array("\(message.from)/".utf8)) else { throw OpenFailure.wrongSender }
        let result = try unsealed(message, data)
        // A group's read (to `SENDER#NAME`) is opened on a copy, its state not kept, as a typing
        // is: the group's other members never see the reader's generations used for reads, and
        // this device sees only some; moving the reader's ratchet past texts still on their way
        // here would leave them only the 32 skipped keys (docs/E2EE.md, Part 7).
        if Self.isGroupRead(message) { return result }
        // Queued in order: a state this actor writes later (a seal, a commit) goes after this
        // one, and should this one fail, is refused until the group is dropped (`forget`,
        // `ClientStore.unkeptOpenings`): no state on disk has used a message's key without the
        // message beside it.
        let state = try group.savedState()
        groups[conversation] = group
        writes.touched.withLock { _ = $0.insert(conversation) }
        store.queueOpened(conversation, state: state, opened: (message.seq, .init(id: message.id, inner: data)), keys: generation) { result in
            if case .failure(let error) = result { writes.queued.failure.value = error }
        }
        return result
    }

    /// `message` with what its sealed content held; its id must be the one inside.
    private func unsealed(_ message: IncomingMessage, _ data: [UInt8]) throws -> IncomingMessage {
        guard let inner = try? Simp_Message(serializedBytes: data) else { throw OpenFailure.malformed }
        guard inner.messageID == message.id else { throw OpenFailure.wrongID }
        // A text moved into a SEALED_READ (or a read into a SEALED) by the server is refused.
        guard SealedSignals.innerFits(outer: message.sealedRead ? .sealedRead : .sealed, inner: inner.type) else {
            throw OpenFailure.malformed
        }
        var opened = message
        opened.unseal(inner)
        if Self.isGroupRead(message) {
            guard let address = SealedSignals.ReadAddress(message.to),
                  let taken = SignalRules.groupReadAddressing(address, from: message.from, user: user) else { throw OpenFailure.malformed }
            opened.to = taken.to
            opened.group = taken.group
        }
        return opened
    }

    /// A group's sealed read receipt (`SEALED_READ` to `SENDER#NAME`).
    static func isGroupRead(_ message: IncomingMessage) -> Bool {
        message.sealedRead && SealedSignals.ReadAddress(message.to)?.group != nil
    }

    // MARK: read receipts and typing (docs/E2EE.md, Part 7)

    /// Whether this device holds the conversation's MLS group (loaded, or on disk).
    func isEncrypted(_ conversation: String) -> Bool {
        groups[conversation] != nil || ((try? store.groupState(of: conversation)) ?? nil) != nil
    }

    /// Every conversation this device holds a group for.
    func encryptedConversations() -> Set<String> {
        Set(groups.keys).union((try? store.conversationsWithGroups()) ?? [])
    }

    /// How to tell `peer` the user is typing (`SignalRules.typingForm`): sealed when this device
    /// holds the conversation's group.
    func typingForm(to peer: String, client: SIMPClient) async -> SignalRules.TypingForm {
        let encrypted = isEncrypted(peer)
        let sealed = encrypted ? try? await sealTyping(to: peer, client: client) : nil
        return SignalRules.typingForm(endToEnd: true, encrypted: encrypted, sealed: sealed)
    }

    /// A TYPING's MLS message: an application message whose data is a `Message` of type TYPING
    /// and nothing else, padded as a sealed message is. Its state is kept before it goes out
    /// (a key is never used twice); it makes no commit.
    private func sealTyping(to peer: String, client: SIMPClient) async throws -> [UInt8] {
        try await setUp(peer, client: client, creating: false)
        // From here to the end, no await: the state read is the state kept.
        guard var group = groups[peer] else { throw OpenFailure.notInConversation }
        let bytes = try Self.sealedTyping(in: &group, randomness: randomness)
        // Counted as a sealed message: a typing uses up a generation, and a receiver takes a
        // message at most 1,000 generations ahead of the last it opened; the Update due after
        // 1,000 (`updateIfDue`) starts the next text on a new epoch, however long the user typed.
        try store.saveGroup(peer, state: try group.savedState(), sealed: 1, keys: generation)
        groups[peer] = group
        return bytes
    }

    /// A TYPING's MLS message (mls_private_message) sealed in `group`.
    static func sealedTyping(in group: inout MLSGroup, randomness: (Int) throws -> [UInt8]) throws -> [UInt8] {
        var inner = Simp_Message()
        inner.type = .typing
        let data: [UInt8] = try inner.serializedBytes()
        // 67: the data's length (2 bytes) and the signature (65), as for a sealed message.
        let message = try group.encrypt(data, paddingLength: SealedText.padding(for: data.count + 67), randomness: randomness)
        return try MLSMessage.privateMessage(message).mlsEncoded()
    }

    /// Whether a TYPING that came is shown (`SignalRules.typingVerdict`): a sealed one is opened
    /// in the conversation's group.
    func typingVerdict(_ body: SealedSignals.TypingBody, client: SIMPClient) async -> SignalRules.Verdict {
        let encrypted = isEncrypted(body.user)
        var opened: SignalRules.Opened?
        if encrypted, let sealed = body.sealed { opened = try? await openSignal(sealed, in: body.user, client: client) }
        return SignalRules.typingVerdict(body, encrypted: encrypted, opened: opened)
    }

    /// Opens a sealed signal on a copy of the conversation's group, whose state is not kept: a
    /// typing never moves a sender's ratchet past messages still on their way to this device
    /// (only 32 skipped keys are kept), and costs no write. A signal sealed on an epoch this
    /// device has not reached makes it fetch and process the commits first, as a message does.
    private func openSignal(_ bytes: [UInt8], in conversation: String, client: SIMPClient) async throws -> SignalRules.Opened {
        guard case .privateMessage(let sealed) = try MLSMessage(mlsDecoding: bytes) else { throw OpenFailure.malformed }
        try await setUp(conversation, client: client, creating: false)
        // Sealed after a commit this device has not processed: the commits first, as for a message.
        if let group = groups[conversation], sealed.epoch > group.epoch { try await catchUp(conversation, client: client) }
        guard let group = groups[conversation] else { throw OpenFailure.notInConversation }
        return try Self.openedSignal(bytes, in: group)
    }

    /// What a sealed signal opens to in `group`, a copy (a value) whose changed state is dropped.
    static func openedSignal(_ bytes: [UInt8], in group: MLSGroup) throws -> SignalRules.Opened {
        var copy = group
        guard case .privateMessage(let sealed) = try MLSMessage(mlsDecoding: bytes),
              case .application(let sender, let data, _, _) = try copy.process(.privateMessage(sealed)),
              case .basic(let identity)? = copy.credential(at: sender),
              let slash = identity.firstIndex(of: UInt8(ascii: "/")) else { throw OpenFailure.malformed }
        let inner = try Simp_Message(serializedBytes: data)
        return SignalRules.Opened(sender: String(decoding: identity[..<slash], as: UTF8.self), type: inner.type)
    }

    // MARK: the group

    /// Makes sure `conversation`'s group is loaded: from disk, by joining with this device's
    /// Welcome, or (`creating`) by making it with a commit that adds every certified device of
    /// both users that has a KeyPackage.
    private func setUp(_ conversation: String, client: SIMPClient, creating: Bool) async throws(ClientError) {
        if groups[conversation] != nil { return }
        if let running = settingUp[conversation] {
            do { try await running.value } catch { throw Self.clientError(error) }
            if groups[conversation] != nil || !creating { return }
        }
        let task = Task { try await self.load(conversation, client: client, creating: creating) }
        settingUp[conversation] = task
        defer { settingUp[conversation] = nil }
        do { try await task.value } catch { throw Self.clientError(error) }
    }

    private func load(_ conversation: String, client: SIMPClient, creating: Bool) async throws {
        if let saved = try store.groupState(of: conversation) {
            var group = try MLSGroup(savedState: saved, credentialValidator: nil, proposalApprover: nil)
            group.credentialValidator = try await validator(for: conversation, client: client)
            groups[conversation] = group
            try await catchUpUnlessRefused(conversation, client: client)
            return
        }
        let validator = try await joiningValidator(for: conversation, client: client, creating: creating)
        if try await adoptPendingRejoin(conversation, validator: validator, client: client) { return }
        for _ in 0..<3 {
            let page = try await client.fetchCommits(in: conversation, fromEpoch: 0, join: true)
            // This device made the group and was stopped before it kept it.
            if let first = page.commits.first, first.epoch == 0,
               let made = try pendingState(conversation, epoch: 0, stored: first.commit, validator: validator) {
                groups[conversation] = made
                try store.saveCommitted(conversation, state: try made.savedState(), renewedAt: clock(), keys: generation)
                try await catchUpUnlessRefused(conversation, client: client)
                return
            }
            if let welcome = page.welcome {
                do {
                    try await join(conversation, welcome, validator: validator, client: client)
                } catch OpenFailure.notInConversation {
                    // A Welcome to keys this device no longer has (a new device key since).
                    if try await rejoinOrRefuse(conversation, validator: validator, client: client, creating: creating) { return }
                    continue
                }
                do {
                    try await catchUpUnlessRefused(conversation, client: client)
                } catch let error as ClientError where error.code == .notAMember {
                    // A former member: its group stays at the Welcome's epoch, for what was sent
                    // to it then; what came later names a later epoch and is not its to read.
                }
                try await refillKeyPackages(client)
                return
            }
            guard page.epoch == 0 else {
                // No Welcome for this device (never added, or its Welcome dropped or withheld):
                // it joins the epoch the order is at by itself.
                if try await rejoinOrRefuse(conversation, validator: validator, client: client, creating: creating) { return }
                continue
            }
            guard creating else { throw OpenFailure.notInConversation }
            if try await create(conversation, validator: validator, client: client) { return }
        }
        throw ClientError("cannot set up the encrypted conversation \(Self.named(conversation)): other commits keep winning",
                          code: .endToEnd)
    }

    /// `rejoin`, or why this device is not in the conversation: true when it joined, false when
    /// another commit took the epoch first (one adding this device, perhaps: read again).
    private func rejoinOrRefuse(_ conversation: String, validator: DirectoryValidator, client: SIMPClient,
                                creating: Bool) async throws -> Bool {
        if let joined = try await rejoin(conversation, validator: validator, client: client) { return joined }
        // Receiving: the message names a group this device was never added to.
        guard creating else { throw OpenFailure.notInConversation }
        throw Self.notAdded(conversation)
    }

    /// Joins the conversation's current epoch by an external commit (RFC 9420 section
    /// 12.4.3.2; docs/E2EE.md, Part 8) from the GroupInfo the order keeps with its last commit:
    /// for a device of a member the order has no Welcome for (never added, its Welcome dropped
    /// or withheld, or its state lost). A leaf of this device already in the tree is removed by
    /// the same commit (a resync: section 12.4.3.2 checks it holds the joiner's credential).
    /// The GroupInfo is verified before anything is made from it (its signature under its
    /// signer's leaf, the tree against its hash, every leaf against the key directory), so the
    /// server cannot make the device join a group of its own. Nil when the order keeps no
    /// GroupInfo (or the user is no member); false when another commit took the epoch first.
    private func rejoin(_ conversation: String, validator: DirectoryValidator, client: SIMPClient) async throws -> Bool? {
        let page: CommitPage
        do {
            page = try await client.fetchCommits(in: conversation, fromEpoch: 0, external: true)
        } catch {
            if error.code == .notAMember { return nil }
            throw error
        }
        // One of an older epoch (an order whose epoch a failover set back) cannot be joined on.
        guard let offered = page.groupInfo, offered.epoch == page.epoch else { return nil }
        guard case .groupInfo(let info) = try MLSMessage(mlsDecoding: offered.groupInfo), info.groupContext.epoch == offered.epoch else {
            throw OpenFailure.malformed
        }
        // The tree may hold leaves of users who are no members now, as a Welcome's may.
        var validator = validator
        var joined: MLSGroup.ExternalCommitOutput? = nil
        var tries = 0
        while joined == nil {
            tries += 1
            guard tries <= DirectoryValidator.maxFormerMembers + 1 else {
                throw OpenFailure.mls("the conversation's GroupInfo names too many former members")
            }
            do {
                joined = try externalCommit(info, validator: validator)
            } catch let unknown as DirectoryValidator.NotKnown {
                validator = try await including(unknown.user, in: validator, client: client)
                checkMembersNext(conversation)
            } catch is DirectoryValidator.Uncertified {
                // A leaf the directory does not certify now: this device's own under the keys it
                // had before a new identity (its peers add it under the new one, told of the
                // change), or a revoked device's a member has not removed yet. Not joined here.
                return nil
            }
        }
        guard let joined else { return nil }
        let epoch = info.groupContext.epoch
        let commit = try joined.message.mlsEncoded()
        try store.keepPending(conversation, epoch: epoch, commit: commit, state: try joined.group.savedState(), keys: generation)
        let groupInfo = Self.groupInfo(of: joined.group, beside: commit.count)
        if let refused = await Self.submit(commit, to: conversation, epoch: epoch, welcome: nil, groupInfo: groupInfo, client: client) {
            if refused.code == .commitConflict {
                // Never stored: another commit holds the epoch.
                try store.dropPending(conversation, keys: generation)
                return false
            }
            guard await Self.held(commit, in: conversation, epoch: epoch, client: client) else { throw refused }
        }
        try kept(commit: joined.group, madeOn: epoch, in: conversation)
        checkMembersNextIfUncertified(conversation, joined.group, validator)
        try await catchUpUnlessRefused(conversation, client: client)
        return true
    }

    /// This device's external commit into the epoch of `info`, removing its own old leaf if the
    /// tree holds one (section 12.4.3.2).
    private func externalCommit(_ info: GroupInfoIn, validator: DirectoryValidator) throws -> MLSGroup.ExternalCommitOutput {
        try MLSGroup.joinByExternalCommit(
            groupInfo: info, credential: credential, capabilities: Self.capabilities, signer: signer, resyncingOwnLeaf: true,
            policy: Self.policy, credentialValidator: validator, randomness: randomness)
    }

    /// A device stopped after the server stored its external commit and before it kept the state
    /// the commit leads to takes that state now (as `pendingState` does for any commit of its
    /// own), rather than join again on a later epoch.
    private func adoptPendingRejoin(_ conversation: String, validator: DirectoryValidator, client: SIMPClient) async throws -> Bool {
        guard let pending = try store.pending(of: conversation), pending.epoch > 0 else { return false }
        let page: CommitPage
        do {
            page = try await client.fetchCommits(in: conversation, fromEpoch: pending.epoch)
        } catch {
            // Removed since: the commit is no longer this device's to take.
            guard error.code == .notAMember else { throw error }
            try store.dropPending(conversation, keys: generation)
            return false
        }
        guard let first = page.commits.first, first.epoch == pending.epoch,
              let state = try pendingState(conversation, epoch: pending.epoch, stored: first.commit, validator: validator) else { return false }
        groups[conversation] = state
        try store.saveCommitted(conversation, state: try state.savedState(), renewedAt: clock(), keys: generation)
        try await catchUpUnlessRefused(conversation, client: client)
        return true
    }

    /// A send in a conversation whose order began without this device's current keys: no
    /// Welcome to them (none at all, or one to keys it had before a new device key).
    static func notAdded(_ conversation: String) -> ClientError {
        ClientError("this device is not in the encrypted conversation \(named(conversation)) under its current keys: "
                    + "a device linked later, or given a new identity, is added by another device of the conversation "
                    + "once one is online to be told of it (or sends): try again then", code: .endToEnd)
    }

    private func join(_ conversation: String, _ stored: StoredWelcome, validator: DirectoryValidator,
                      client: SIMPClient) async throws {
        guard case .welcome(let welcome) = try MLSMessage(mlsDecoding: stored.welcome) else { throw OpenFailure.malformed }
        var validator = validator
        var refused: (any Error)?
        let packages = try store.keyPackages()
        // A Welcome to none of the KeyPackages kept: to keys this device had before a new device
        // key (`ClientStore.save`), or to another device. It is not in the group until a member
        // adds it again.
        let references = Set(packages.map(\.reference))
        guard welcome.secrets.contains(where: { references.contains($0.newMember) }) else { throw OpenFailure.notInConversation }
        for kept in packages {
            guard let bundle = try? bundle(of: kept) else { continue }
            // The Welcome's tree may hold leaves of users who are no members now (removed since
            // the commit that added this device): their devices are read, and it is tried again.
            while true {
                do {
                    let group = try MLSGroup(joining: welcome, with: bundle, policy: Self.policy, credentialValidator: validator)
                    try store.saveGroup(conversation, state: try group.savedState(), renewedAt: clock(), keys: generation)
                    try store.removeKeyPackage(kept.reference)
                    groups[conversation] = group
                    checkMembersNextIfUncertified(conversation, group, validator)
                    return
                } catch let unknown as DirectoryValidator.NotKnown {
                    do {
                        validator = try await including(unknown.user, in: validator, client: client)
                        checkMembersNext(conversation)
                    } catch let error as ClientError where Self.openLater(error) {
                        // The directory did not answer: the message is opened later, not refused.
                        throw error
                    } catch {
                        refused = error
                        break
                    }
                } catch {
                    refused = error
                    break
                }
            }
        }
        throw OpenFailure.mls("the Welcome names none of this device's KeyPackages" + (refused.map { " (or its group is refused: \($0))" } ?? ""))
    }

    /// The validator a device with no state for the conversation joins or creates it with:
    /// `validator(for:)`, or, for a user removed from the group before this device joined (the
    /// server still hands it the Welcome of its addition, and it reads what was sent to it
    /// while a member), `formerMemberValidator`.
    private func joiningValidator(for conversation: String, client: SIMPClient, creating: Bool) async throws -> DirectoryValidator {
        do {
            return try await validator(for: conversation, client: client)
        } catch {
            guard error.code == .notAMember, !creating else { throw error }
            return try await formerMemberValidator(client: client)
        }
    }

    /// For a device of a user removed from a group before it joined: this user's own certified
    /// devices, every other leaf of the Welcome's tree read as a former member's (`NotKnown`,
    /// at most `DirectoryValidator.maxFormerMembers` users). The members list is a member's to
    /// read, and the Welcome is all this device will use the group for.
    private func formerMemberValidator(client: SIMPClient) async throws(ClientError) -> DirectoryValidator {
        let own = try await Self.entry(of: user, client: client).get()
        if own.user != user || own.identityKey != identityPublic {
            throw ClientError("the server gives another identity key for \(user) than this device's", code: .endToEnd)
        }
        var keys: [[UInt8]: [UInt8]] = [:]
        for device in verifiedDevices(of: own) {
            keys[KeyDirectoryRules.credentialIdentity(user: user, device: device.device)] = device.deviceKey
        }
        var validator = DirectoryValidator(keys: keys, owners: [user])
        validator.admitsFormerMembers = true
        return validator
    }

    /// `validator` with `user`'s certified devices for checking leaves (a member since removed):
    /// the identity pinned as any peer's, the devices from the same answer; with
    /// `admittingRevoked`, its revoked ones too, and those this device saw certified (`validator(for:admittingRevoked:)`).
    private func including(_ user: String, in validator: DirectoryValidator, client: SIMPClient,
                           admittingRevoked: Bool = false) async throws -> DirectoryValidator {
        let entry: KeyDirectoryEntry
        switch await Self.pin(user, client: client) {
        case .success(let pinned) where pinned.user == user: entry = pinned
        case .success: throw DirectoryValidator.Uncertified()
        case .failure(let error): throw error
        }
        var extended = validator.including(user, devices: verifiedDevices(of: entry),
                                           revoked: admittingRevoked ? verified(entry.revokedDevices, of: entry) : [])
        // Catching up, a former member's devices this device saw certified pass as a member's do.
        if admittingRevoked { extended.admitSeen(try storeCall { try store.seenDevices(of: user) }) }
        return extended
    }

    /// Creates the group with everyone's devices; false when another device's commit won epoch 0.
    private func create(_ peer: String, validator: DirectoryValidator, client: SIMPClient) async throws -> Bool {
        let adds = try await claim(from: validator.owners, validator: validator, client: client) { _ in true }
        // A group may start with this user's devices alone: members with keys are added as they come.
        guard GroupName.addressed(by: peer) != nil || adds.contains(where: { $0.user == peer }) else {
            throw ClientError("\(peer) has no device with keys for encryption yet (their client must set up an identity)",
                              code: .endToEnd)
        }
        var group = try MLSGroup.create(
            groupID: randomness(16), suite: Self.suite, credential: credential, capabilities: Self.capabilities,
            lifetime: Lifetime(notBefore: 0, notAfter: .max), signer: signer, randomness: randomness)
        group.credentialValidator = validator
        group.policy = Self.policy
        // The devices one request carries; the member check that follows adds the rest (`resync`).
        let (output, commit, welcome, _, groupInfo) = try fitting(group, adding: adds, removing: [], in: peer)
        try store.keepPending(peer, epoch: 0, commit: commit, state: try output.group.savedState(), keys: generation)
        if let refused = await Self.submit(commit, to: peer, welcome: welcome, groupInfo: groupInfo, client: client) {
            // Lost: the next fetch of the order drops the pending entry (`pendingState`).
            if refused.code == .commitConflict { return false }
            // Not known to be stored: the pending commit stays, for the order to settle.
            guard await Self.held(commit, in: peer, epoch: 0, client: client) else { throw refused }
        }
        try kept(commit: output.group, madeOn: 0, in: peer)
        return true
    }

    /// A commit of this device's made on `epoch` is in the order: its state is kept in place of
    /// the pending one. Unless the group already went on past that epoch: catching up (a
    /// message of the new epoch opened while the submit was answered) took the same state from
    /// the pending entry, and may have sealed on it since; putting it back would use its keys
    /// again.
    private func kept(commit state: MLSGroup, madeOn epoch: UInt64, in conversation: String) throws(ClientError) {
        afterCommitStored?(conversation)
        if let current = groups[conversation], current.epoch != epoch { return }
        groups[conversation] = state
        // Should this write fail, the pending entry stays and is taken when the order is read.
        try storeCall { try store.saveCommitted(conversation, state: try state.savedState(), renewedAt: clock(), keys: generation) }
    }

    /// The pending commit of `conversation` on `epoch`, if `stored` is it: the state it leads to.
    /// Another commit stored on that epoch means this device's never was: it is dropped.
    private func pendingState(_ conversation: String, epoch: UInt64, stored: [UInt8],
                              validator: DirectoryValidator) throws -> MLSGroup? {
        guard let pending = try store.pending(of: conversation), pending.epoch == epoch else { return nil }
        guard pending.commit == stored else {
            try store.dropPending(conversation, keys: generation)
            return nil
        }
        var group = try MLSGroup(savedState: pending.state, credentialValidator: nil, proposalApprover: nil)
        group.credentialValidator = validator
        return group
    }

    /// Records the peer's identity key on first use, or reports its change (`pinIdentity`).
    /// `peers`' entries as `pin(_:client:)` gives them, fetched together, in `peers`' order.
    private static func pin(_ peers: [String], client: SIMPClient) async -> [(String, Result<KeyDirectoryEntry, ClientError>)] {
        await withTaskGroup(of: (Int, Result<KeyDirectoryEntry, ClientError>).self) { tasks in
            for (index, peer) in peers.enumerated() { tasks.addTask { (index, await pin(peer, client: client)) } }
            var results = [Result<KeyDirectoryEntry, ClientError>?](repeating: nil, count: peers.count)
            for await (index, result) in tasks { results[index] = result }
            return zip(peers, results).map { ($0, $1!) }
        }
    }

    /// This user's own entry, or why not.
    private static func entry(of user: String, client: SIMPClient) async -> Result<KeyDirectoryEntry, ClientError> {
        do {
            return .success(try await client.keyDirectory(of: user))
        } catch {
            return .failure(error)
        }
    }

    /// The peer's key directory entry whose identity key is now pinned (recorded in the store),
    /// or why not.
    private static func pin(_ peer: String, client: SIMPClient) async -> Result<KeyDirectoryEntry, ClientError> {
        do {
            return .success(try await client.pinIdentity(of: peer).entry)
        } catch {
            return .failure(error)
        }
    }

    /// One validated KeyPackage of each certified device of `owners` that `wanted` names (by
    /// credential identity), claimed from the server; a package that does not validate, or whose
    /// credential or key is not the certified device's, is left out (never encrypted to).
    private func claim(from owners: [String], validator: DirectoryValidator, client: SIMPClient,
                       wanted: ([UInt8]) -> Bool) async throws -> [Claimed] {
        var adds: [Claimed] = []
        for owner in owners {
            for claimed in try await client.claimKeyPackages(of: owner) {
                let identity = KeyDirectoryRules.credentialIdentity(user: owner, device: claimed.device)
                guard wanted(identity), case .keyPackage(let wire)? = try? MLSMessage(mlsDecoding: claimed.keyPackage),
                      let package = try? wire.validate(suite: Self.suite), package.credential == .basic(identity: identity),
                      validator.keys[identity] == package.signatureKey.rawRepresentation else { continue }
                adds.append((owner, claimed.device, package))
            }
        }
        return adds
    }

    /// Brings the group's members in line with the key directory, at most once per
    /// `checkInterval`: a device no longer certified (revoked, or its user's identity replaced)
    /// is removed, a certified device with a KeyPackage that is not a member is added, by one
    /// commit in the conversation's order; a lost race is caught up and tried again.
    private func syncMembers(_ conversation: String, client: SIMPClient) async throws(ClientError) {
        if let last = checked[conversation], ContinuousClock.now - last < checkInterval { return }
        if let running = syncing[conversation] {
            do { try await running.value } catch { throw Self.clientError(error) }
            // A change told after it began (an acceptance that must be committed now, say) is
            // not in what it read: once more, unless another check began meanwhile (its
            // starter may not have resumed yet to clear its entry: a finished one is no other).
            let another = syncing[conversation].map { $0 != running } ?? false
            guard checkedFrom[conversation] != changes[conversation, default: 0], !another else { return }
        }
        let task = Task { try await self.resync(conversation, client: client) }
        syncing[conversation] = task
        defer { if syncing[conversation] == task { syncing[conversation] = nil } }
        do { try await task.value } catch { throw Self.clientError(error) }
    }

    /// Before this device makes a commit on the group's epoch: a pending commit of its own on
    /// that epoch (its fate unknown: no answer, or replicas that did not confirm) is settled
    /// first by reading the order, which takes it if it holds it and drops it if another commit
    /// holds the epoch. One the order does not hold was never stored: it is dropped.
    private func settlePending(_ conversation: String, client: SIMPClient) async throws {
        // Its own submit is still waiting for the answer: nothing to settle yet.
        guard !committing.contains(conversation),
              let epoch = groups[conversation]?.epoch, let pending = try store.pending(of: conversation),
              pending.epoch == epoch else { return }
        try await catchUpUnlessRefused(conversation, client: client)
        if !committing.contains(conversation), let left = try store.pending(of: conversation), left.epoch == groups[conversation]?.epoch {
            try store.dropPending(conversation, keys: generation)
        }
    }

    private func resync(_ conversation: String, client: SIMPClient) async throws {
        let started = ContinuousClock.now
        let from = changes[conversation, default: 0]
        checkedFrom[conversation] = from
        let validator = try await validator(for: conversation, client: client)
        let mine = KeyDirectoryRules.credentialIdentity(user: user, device: device)
        // Claimed and not yet in a stored commit (one lost a race, or did not fit the last one).
        var claimed: [Claimed] = []
        var lost = 0
        while lost < 3 {
            try await settlePending(conversation, client: client)
            guard let group = groups[conversation] else { return }
            // A device counts as present only under the key its user certified now: a leaf of the
            // same name under another key (a revoked device, or one of a replaced identity, whose
            // successor took its name) is not it.
            let present = Set(Self.memberDevices(group).values)
            let missing = Set(validator.keys.filter { !present.contains(MemberDevice(identity: $0.key, key: $0.value)) }.keys)
                .subtracting([mine])
            claimed.removeAll { !missing.contains(Self.identity(of: $0)) }
            let unclaimed = missing.subtracting(claimed.map(Self.identity))
            if !unclaimed.isEmpty {
                claimed += try await claim(from: validator.owners, validator: validator, client: client) { unclaimed.contains($0) }
            }
            // No await from here to the submit: the commit is made on the state as it is now.
            guard var current = groups[conversation] else { return }
            current.credentialValidator = validator
            let stale = Self.memberDevices(current).filter { $0.key != current.myLeaf && validator.keys[$0.value.identity] != $0.value.key }
                .map(\.key)
            if claimed.isEmpty && stale.isEmpty {
                groups[conversation] = current
                if changes[conversation, default: 0] == from { checked[conversation] = started }
                return
            }
            // An Update of this device's is in flight: the next send checks again.
            guard !committing.contains(conversation) else { return }
            committing.insert(conversation)
            defer { committing.remove(conversation) }
            let epoch = current.epoch
            let (output, commit, welcome, added, groupInfo) = try fitting(current, adding: claimed, removing: stale, in: conversation)
            try store.keepPending(conversation, epoch: epoch, commit: commit, state: try output.group.savedState(), keys: generation)
            if let refused = await Self.submit(commit, to: conversation, epoch: epoch, welcome: welcome, groupInfo: groupInfo, client: client) {
                if refused.code == .commitConflict {
                    lost += 1
                    try await catchUp(conversation, client: client)
                    continue
                }
                guard await Self.held(commit, in: conversation, epoch: epoch, client: client) else { throw refused }
            }
            // Stored: the new epoch's state replaces whatever this epoch's state became meanwhile.
            // Its path renewed this device's leaf too.
            try kept(commit: output.group, madeOn: epoch, in: conversation)
            claimed.removeFirst(added)
            if claimed.isEmpty {
                if changes[conversation, default: 0] == from { checked[conversation] = started }
                return
            }
        }
        throw ClientError("cannot update the encrypted conversation \(Self.named(conversation)): other commits keep winning", code: .endToEnd)
    }

    /// A device's KeyPackage, claimed from the server and validated (`claim`).
    typealias Claimed = (user: String, device: String, package: KeyPackage)

    private static func identity(of claimed: Claimed) -> [UInt8] {
        KeyDirectoryRules.credentialIdentity(user: claimed.user, device: claimed.device)
    }

    /// `group`'s commit adding the first of `adds` (all that one `SubmitCommit` carries:
    /// `CommitRules.submitFits`) and removing `stale`, encoded, with its one Welcome for the
    /// devices it adds (RFC 9420 section 12.4.3.1), how many of `adds` it took, and the new
    /// epoch's GroupInfo when it fits beside them (`groupInfo(of:beside:)`). Devices that
    /// do not fit with the commit (each adds a KeyPackage to it and a secret to the Welcome) go
    /// in the next commits, one after the other. A single device that does not fit (the group's
    /// Welcome over its limit) is refused here with why, not by the server resetting the
    /// connection.
    private func fitting(_ group: MLSGroup, adding adds: [Claimed], removing stale: [LeafIndex],
                         in conversation: String) throws -> (MLSGroup.CommitOutput, [UInt8], CommitWelcome?, Int, [UInt8]?) {
        var count = min(adds.count, CommitRules.maxAddedDevices)
        while true {
            let taken = Array(adds.prefix(count))
            // Each try on a copy: making a commit changes the group it is made on.
            var attempt = group
            let output = try attempt.commit(adding: taken.map(\.package), removing: stale, randomness: randomness)
            let commit = try output.message.mlsEncoded()
            var welcome: CommitWelcome?
            if let made = output.welcome {
                welcome = CommitWelcome(try MLSMessage.welcome(made).mlsEncoded(),
                                        for: taken.map { AddedDevice(user: $0.user, device: $0.device) })
            }
            let welcomeBytes = welcome?.welcome.count ?? 0
            if CommitRules.submitFits(commit: commit.count, welcome: welcomeBytes, added: welcome?.added.count ?? 0) {
                let groupInfo = Self.groupInfo(of: output.group, beside: commit.count, welcome: welcomeBytes, added: welcome?.added.count ?? 0)
                return (output, commit, welcome, count, groupInfo)
            }
            guard count > 1 else {
                let over = welcomeBytes > CommitRules.maxWelcomeBytes
                    ? "its Welcome would be \(welcomeBytes) bytes, over the limit of \(CommitRules.maxWelcomeBytes)"
                    : "its commit would be \(commit.count) bytes with a Welcome of \(welcomeBytes), over what one request carries"
                throw ClientError("cannot add a device to the encrypted conversation \(Self.named(conversation)): \(over) "
                                  + "(docs/E2EE.md, Part 6: large groups)", code: .endToEnd)
            }
            count /= 2
        }
    }

    /// Renews this device's leaf keys by an Update when due (`updateAfter`): a commit with a path
    /// and no proposals (sections 12.4, 16.6). A lost race is caught up; the Update is then
    /// tried at the next send (also when the winner is a commit this device refuses).
    private func updateIfDue(_ conversation: String, client: SIMPClient) async throws(ClientError) {
        // One commit of this device's at a time in a conversation (a seal that comes meanwhile
        // goes on the current epoch; the Update is still due at the next).
        guard !committing.contains(conversation) else { return }
        do { try await settlePending(conversation, client: client) } catch { throw Self.clientError(error) }
        guard !committing.contains(conversation) else { return }
        let now = clock()
        guard let renewal = try storeCall({ try store.renewal(of: conversation) }),
              renewal.sealed >= updateAfter.messages || now - renewal.at >= updateAfter.millis,
              var current = groups[conversation] else { return }
        let epoch = current.epoch
        let output: MLSGroup.CommitOutput
        let commit: [UInt8]
        do {
            output = try current.commit(randomness: randomness)
            commit = try output.message.mlsEncoded()
        } catch {
            throw ClientError("cannot make an Update for \(conversation): \(error)", code: .endToEnd)
        }
        committing.insert(conversation)
        defer { committing.remove(conversation) }
        try storeCall { try store.keepPending(conversation, epoch: epoch, commit: commit, state: try output.group.savedState(), keys: generation) }
        let groupInfo = Self.groupInfo(of: output.group, beside: commit.count)
        if let refused = await Self.submit(commit, to: conversation, epoch: epoch, welcome: nil, groupInfo: groupInfo, client: client) {
            if refused.code == .commitConflict {
                do {
                    try await catchUp(conversation, client: client)
                } catch OpenFailure.commitRefused {
                    // The order holds a commit this device refuses (warned): no Update while it
                    // does; what is sent goes on this epoch, to the members in it.
                } catch {
                    throw Self.clientError(error)
                }
                return
            }
            guard await Self.held(commit, in: conversation, epoch: epoch, client: client) else { throw refused }
        }
        try kept(commit: output.group, madeOn: epoch, in: conversation)
    }

    /// Each member's leaf and credential identity ("USER/DEVICE").
    static func memberIdentities(_ group: MLSGroup) -> [LeafIndex: [UInt8]] {
        memberDevices(group).mapValues(\.identity)
    }

    /// A member's device as its leaf has it: credential identity ("USER/DEVICE") and signature key.
    struct MemberDevice: Hashable {
        let identity: [UInt8]
        let key: [UInt8]
    }

    /// `checkMembersNext` when `group` holds a leaf (not this device's) under no current
    /// certificate: a revoked device's, which a commit made while it was certified added
    /// (`DirectoryValidator.pastKeys`), or a former member's. The next send removes it, even if
    /// the members were checked a moment ago, and seals nothing to it first.
    private func checkMembersNextIfUncertified(_ conversation: String, _ group: MLSGroup, _ validator: DirectoryValidator) {
        let uncertified = Self.memberDevices(group).contains { leaf, device in
            leaf != group.myLeaf && validator.keys[device.identity] != device.key
        }
        if uncertified { checkMembersNext(conversation) }
    }

    /// Each member's leaf and device.
    static func memberDevices(_ group: MLSGroup) -> [LeafIndex: MemberDevice] {
        var devices: [LeafIndex: MemberDevice] = [:]
        for leaf in group.members {
            if case .basic(let identity)? = group.credential(at: leaf), let key = group.signatureKey(at: leaf) {
                devices[leaf] = MemberDevice(identity: identity, key: key)
            }
        }
        return devices
    }

    /// Whether the conversation's order has `commit` on `epoch`: asked after a submit whose fate
    /// is unknown (answered `REPLICAS_UNAVAILABLE`, stored on the master but not yet on a
    /// replica, or not answered at all). Such a commit may hold, and a peer may already have
    /// joined with its Welcome: it is this device's once the order shows it (docs/E2EE.md,
    /// Part 3, "Replicas and a lost write"). Dropping it left the device out of a group it made
    /// (simp-chaos seed 2929851673, cluster, min-replicas 1: 16 undecryptable messages).
    private static func held(_ commit: [UInt8], in conversation: String, epoch: UInt64, client: SIMPClient) async -> Bool {
        guard let page = try? await client.fetchCommits(in: conversation, fromEpoch: epoch) else { return false }
        return page.commits.first { $0.epoch == epoch }?.commit == commit
    }

    /// Submits a commit made on `epoch`; the refusal, if any.
    private static func submit(_ commit: [UInt8], to peer: String, epoch: UInt64 = 0, welcome: CommitWelcome?, groupInfo: [UInt8]?,
                               client: SIMPClient) async -> ClientError? {
        do {
            _ = try await client.submitCommit(commit, to: peer, epoch: epoch, welcome: welcome, groupInfo: groupInfo)
            return nil
        } catch {
            return error
        }
    }

    /// The GroupInfo of the epoch `group` is in, for the server to keep with the commit that led
    /// there (RFC 9420 section 12.4.3: signed by this device's leaf, with `external_pub` and the
    /// ratchet tree), so that a device of the conversation with no state can join that epoch by
    /// an external commit (docs/E2EE.md, Part 8). Nil when it does not fit in the request beside
    /// the commit and its Welcome: the conversation then keeps none until a later commit's.
    static func groupInfo(of group: MLSGroup, beside commit: Int, welcome: Int = 0, added: Int = 0) -> [UInt8]? {
        let info: [UInt8]
        do {
            let made: GroupInfoIn = try group.groupInfo(externalPub: true)
            info = try MLSMessage.groupInfo(made).mlsEncoded()
        } catch {
            return nil
        }
        guard CommitRules.submitFits(commit: commit, welcome: welcome, added: added, groupInfo: info.count) else { return nil }
        return info
    }

    /// Processes the conversation's commits the server stored since the group's epoch, in order.
    ///
    /// The page must hold the commit due next, then the one after, and so on: a commit the
    /// server labels with another epoch is refused (an order handed again or out of order),
    /// unless the page starts at the oldest commit kept (the device is further behind than the
    /// order keeps: Part 3, "Catching up"). Each commit is then checked by MLS (section 12.4.2:
    /// its own epoch, membership tag, signature, confirmation tag, path; a committer's leaf the
    /// key directory does not certify). A refused commit is never applied: the commits before
    /// it are kept, the device stays at that epoch, warns (`ClientEvent.commitRefused`, once per
    /// commit) and throws `OpenFailure.commitRefused`. So it never takes a second commit for
    /// an epoch it left.
    private func catchUp(_ conversation: String, client: SIMPClient) async throws {
        // Past commits of a group this device holds may have added a device revoked since.
        var validator = try await validator(for: conversation, client: client, admittingRevoked: true)
        while let epoch = groups[conversation]?.epoch {
            let page = try await client.fetchCommits(in: conversation, fromEpoch: epoch)
            // From the copy to its write-back nothing awaits: another task (a message opened, a
            // seal, a commit of this device's) may change the group at any await, and a copy
            // written back over its change would use keys again or lose a commit.
            guard var group = groups[conversation] else { return }
            // Another catch-up took the group on while this page was fetched: fetch from there.
            if group.epoch != epoch { continue }
            group.credentialValidator = validator
            // A member's device that rejoins by external commit (Part 8), its path leaf checked
            // against the key directory as any committer's (`checkPathLeaf`).
            group.policy.acceptsExternalCommits = true
            var refused: (due: UInt64, stored: StoredCommit, why: String)?
            // A leaf of a user whose devices were not read: read them once the copy is kept.
            var unknown: (user: String, due: UInt64, stored: StoredCommit)?
            var adopted = false
            for (index, stored) in page.commits.enumerated() {
                let due = group.epoch
                if index == 0, stored.epoch > due, page.epoch >= UInt64(CommitRules.keptCommits),
                   stored.epoch == page.epoch - UInt64(CommitRules.keptCommits) {
                    break
                }
                guard stored.epoch == due else {
                    refused = (due, stored, "the server gives the commit it labels epoch \(stored.epoch) where epoch \(due)'s is due")
                    break
                }
                // This device's own commit, stored before it could keep the state it leads to.
                if let pending = try pendingState(conversation, epoch: due, stored: stored.commit, validator: validator) {
                    group = pending
                    adopted = true
                    continue
                }
                let received: MLSGroup.Received
                do {
                    let message = try MLSMessage(mlsDecoding: stored.commit)
                    if let problem = Self.externalJoinProblem(message, current: validator.keys) {
                        refused = (due, stored, problem)
                        break
                    }
                    received = try group.process(message)
                } catch let notKnown as DirectoryValidator.NotKnown {
                    // A past commit of a group may add a user who is no member now (removed
                    // since): that user's devices are read, and the commit checked again.
                    unknown = (notKnown.user, due, stored)
                    break
                } catch {
                    // The state is unchanged by the refused commit (`MLSGroup.process`).
                    refused = (due, stored, "\(error)")
                    break
                }
                if received == .removed { throw OpenFailure.notInConversation }
            }
            let moved = group.epoch != epoch
            if moved {
                if adopted {
                    try store.saveCommitted(conversation, state: try group.savedState(), renewedAt: clock(), keys: generation)
                } else {
                    try store.saveGroup(conversation, state: try group.savedState(), keys: generation)
                }
                groups[conversation] = group
                checkMembersNextIfUncertified(conversation, group, validator)
            }
            if let unknown {
                do {
                    validator = try await including(unknown.user, in: validator, client: client, admittingRevoked: true)
                    checkMembersNext(conversation)
                    continue
                } catch let error as ClientError where Self.openLater(error) {
                    // The directory did not answer (what was processed is kept): the message
                    // is opened later, and no commit is refused for it.
                    throw error
                } catch {
                    refused = (unknown.due, unknown.stored, "\(error)")
                }
            }
            if let refused {
                var seen = Array(conversation.utf8) + [0]
                for number in [refused.due, refused.stored.epoch] { withUnsafeBytes(of: number.bigEndian) { seen += $0 } }
                seen += SHA256.hash(data: refused.stored.commit)
                if warned.insert(seen).inserted {
                    client.warn(.commitRefused, .commitRefused(conversation: conversation, epoch: refused.due, reason: refused.why))
                }
                throw OpenFailure.commitRefused("the commit for epoch \(refused.due): \(refused.why)")
            }
            // A page that moves nothing ends the catch-up: a server that answers `more` forever
            // does not keep the device fetching.
            if !page.more || page.commits.isEmpty || !moved { return }
        }
    }

    /// Why an external commit (a device rejoining, Part 8) is refused before MLS reads it: its
    /// joiner's path leaf must be a device its user certifies now, under the key certified now
    /// (`current`: the directory's keys of the conversation's users, never a revoked, former or
    /// past one). A commit of a member is signed inside the group (a membership tag, a leaf the
    /// tree holds), so catching up takes one whose leaves were certified when it was made; an
    /// external commit is signed by its joiner alone, so one under a revoked device's stolen key,
    /// stored by a server that ignores its own check, would let that key in and remove the real
    /// device's leaf (the resync Remove compares credentials, not keys). Nil for any other
    /// message. A rejoin made before its device was revoked is refused by a device that catches
    /// up after the revocation (warned, `commitRefused`).
    static func externalJoinProblem(_ message: MLSMessage, current: [[UInt8]: [UInt8]]) -> String? {
        guard case .publicMessage(let commit) = message, commit.content.sender == .newMemberCommit else { return nil }
        guard case .commit(let body) = commit.content.content, let path = body.path,
              case .basic(let identity) = path.leafNode.credential else {
            return "an external commit without a path leaf with a basic credential"
        }
        guard let key = current[identity], key == path.leafNode.signatureKey.bytes else {
            let name = String(decoding: identity, as: UTF8.self)
            return "an external commit from \(name) under a key its user does not certify now"
        }
        return nil
    }

    /// `catchUp`, where a refused commit is not this call's failure: a group loaded from disk or
    /// joined stays at the epoch it reached (warned), and what needs a later epoch fails then.
    private func catchUpUnlessRefused(_ conversation: String, client: SIMPClient) async throws {
        do {
            try await catchUp(conversation, client: client)
        } catch OpenFailure.commitRefused {
            return
        }
    }

    /// The certified devices of the conversation's users (this user and the peer, or a group's
    /// members), as the key directory has them, each certificate checked under its user's
    /// identity key; this user's identity must be the one this device holds, and every other
    /// user's is pinned on first use (`safetyNumber`). In a group, a member without an identity
    /// (a client without encryption) has no device to add: it cannot read the group. With
    /// `admittingRevoked` (catching up a group this device holds, never joining or creating one),
    /// the users' revoked certificates pass too, and the devices this device saw certified
    /// (`DirectoryValidator.pastKeys`): a past commit may have added a device revoked since, or
    /// come from one whose user has a new identity since, but a Welcome from one would start a
    /// conversation in its user's name.
    private func validator(for conversation: String, client: SIMPClient,
                           admittingRevoked: Bool = false) async throws(ClientError) -> DirectoryValidator {
        let group = GroupName.addressed(by: conversation)
        let others: [String]
        if let group {
            others = try await client.groupMembers(group).members.map(\.name).filter { $0 != user }
        } else {
            others = [conversation]
        }
        var keys: [[UInt8]: [UInt8]] = [:]
        var owners = [user]
        // Each peer's devices are read from the very answer its identity was pinned from (and
        // checked for a change): a second fetch could name another key, whose devices would be
        // trusted without the change being told.
        var entries: [String: KeyDirectoryEntry] = [:]
        // The directory reads go out together: one round trip for a group of any size, not one
        // per member.
        async let ownEntry = Self.entry(of: user, client: client)
        for (peer, pinned) in await Self.pin(others, client: client) {
            switch pinned {
            case .success(let entry) where entry.user == peer: entries[peer] = entry
            case .success(let entry):
                throw ClientError("the server answered \(entry.user)'s key directory for \(peer)", code: .endToEnd)
            case .failure(let refused) where group != nil && [.noIdentity, .unknownUser].contains(refused.code):
                // A member without keys (or no longer a user) has no device to add.
                continue
            case .failure(let refused) where refused.code == .noIdentity:
                throw ClientError("\(peer) has no identity key yet: their client has not set up end-to-end encryption", code: .noIdentity)
            case .failure(let refused):
                // A user who does not exist is told as such ("no such user"), not as one without keys.
                throw refused
            }
            if try storeCall({ try store.isHeld(peer: peer) }) {
                throw ClientError("\(peer)'s identity changed since you verified it: compare the new safety number "
                                  + "(/verify \(peer)) first", code: .identityChanged)
            }
            owners.append(peer)
        }
        let own = try await ownEntry.get()
        if own.user != user || own.identityKey != identityPublic {
            throw ClientError("the server gives another identity key for \(user) than this device's", code: .endToEnd)
        }
        entries[user] = own
        for owner in owners {
            guard let entry = entries[owner] else { continue }
            let verified = verifiedDevices(of: entry)
            for device in verified {
                keys[KeyDirectoryRules.credentialIdentity(user: owner, device: device.device)] = device.deviceKey
            }
            warnOfUncertified(entry, verified: verified, client: client)
            recordSeen(verified, of: owner)
        }
        var validator = DirectoryValidator(keys: keys, owners: owners)
        validator.admitsFormerMembers = group != nil
        for owner in owners where admittingRevoked {
            guard let entry = entries[owner] else { continue }
            validator.admitRevoked(verified(entry.revokedDevices, of: entry))
            validator.admitSeen(try storeCall { try store.seenDevices(of: owner) })
        }
        return validator
    }

    /// Keeps `owner`'s devices certified now (verified under the identity this device holds, or
    /// pinned for `owner`) as seen: after a new identity of `owner` ends the directory's list
    /// of revoked certificates, a commit one of them made while this device was away still
    /// passes when it catches up (`DirectoryValidator.admitSeen`). Written once a device while
    /// the client runs; a write that fails (a full disk) is tried again at the next look, and
    /// fails nothing else: the record serves later catch-ups only.
    private func recordSeen(_ devices: [VerifiedDevice], of owner: String) {
        let seen = devices.map {
            ClientStore.SeenDevice(identity: KeyDirectoryRules.credentialIdentity(user: owner, device: $0.device), key: $0.deviceKey,
                                   identityKey: $0.identityKey)
        }
        let new = seen.filter { !recordedSeen.contains($0) }
        guard !new.isEmpty else { return }
        guard (try? store.recordSeen(new, of: owner, at: clock())) != nil else { return }
        if recordedSeen.count >= Self.verifiedCertificatesKept { recordedSeen.removeAll() }
        recordedSeen.formUnion(new)
    }

    /// `entry.verifiedDevices`, each certificate's signature checked once while the client runs:
    /// a member check reads the same certificates before most sends.
    private func verifiedDevices(of entry: KeyDirectoryEntry) -> [VerifiedDevice] {
        verified(entry.devices, of: entry)
    }

    /// Those of `certificates` (`entry`'s devices or revoked devices) that verify under `entry`'s
    /// identity key, each checked once while the client runs.
    private func verified(_ certificates: [CertifiedDevice], of entry: KeyDirectoryEntry) -> [VerifiedDevice] {
        guard let identity = IdentityKey(entry.identityKey) else { return [] }
        return certificates.compactMap { device in
            let certificate = UnverifiedDeviceCertificate(user: entry.user, device: device.device, deviceKey: device.deviceKey,
                                                          signature: device.signature)
            let seen = CertificateUnder(identity: entry.identityKey, certificate: certificate)
            if let known = verifiedCertificates[seen] { return known }
            guard let certified = try? certificate.verified(by: identity) else { return nil }
            let verified = VerifiedDevice(certified)
            if verifiedCertificates.count >= Self.verifiedCertificatesKept { verifiedCertificates.removeAll() }
            verifiedCertificates[seen] = verified
            return verified
        }
    }

    /// A certificate as the directory gave it, with the identity key it is to verify under.
    private struct CertificateUnder: Hashable {
        let identity: [UInt8]
        let certificate: UnverifiedDeviceCertificate
    }

    /// Warns (`ClientEvent.uncertifiedDevice`, once per device and certificate) of each device
    /// the directory lists whose certificate does not verify under the identity key: left out
    /// of every group (`DirectoryValidator` holds only verified ones), its user never approved it.
    private func warnOfUncertified(_ entry: KeyDirectoryEntry, verified: [VerifiedDevice], client: SIMPClient) {
        for device in entry.devices where !verified.contains(where: { $0.device == device.device && $0.deviceKey == device.deviceKey }) {
            var seen = Array("\(entry.user)/\(device.device)".utf8) + [0]
            seen += SHA256.hash(data: device.deviceKey + device.signature + entry.identityKey)
            guard warned.insert(seen).inserted else { continue }
            client.warn(.uncertifiedDevice, .uncertifiedDevice(user: entry.user, device: device.device))
        }
    }

    /// The conversation a message belongs to: its group, or the other user of a one-to-one one.
    static func conversation(of message: IncomingMessage, user: String) -> String {
        if GroupName.addressed(by: message.to) != nil { return message.to }
        // A group's sealed read (`SENDER#NAME`) is sealed in the group's.
        if isGroupRead(message), let address = SealedSignals.ReadAddress(message.to) { return address.conversation }
        return message.from == user ? message.to : message.from
    }

    /// "with USER", or "#GROUP", for errors.
    static func named(_ conversation: String) -> String {
        GroupName.addressed(by: conversation) != nil ? conversation : "with \(conversation)"
    }

    /// One of the user's devices was revoked by this one: every conversation this device has a
    /// group for removes it now, by commit (its certificate is gone from the key directory).
    func deviceRevoked(client: SIMPClient) async {
        for conversation in (try? store.conversationsWithGroups()) ?? [] {
            await membersChanged(conversation, client: client, commit: true)
        }
    }

    /// The next send checks the conversation's members against the key directory at once, not
    /// after `checkInterval`, even if a check running now began before this: after a change of
    /// members, or once a former member's leaf was read (a leaf kept only for checking, which a
    /// member check removes if the group still holds it).
    private func checkMembersNext(_ conversation: String) {
        checked[conversation] = nil
        changes[conversation, default: 0] += 1
    }

    /// The server told this device that `peer`'s key directory changed (a KEYS datagram: a
    /// device others can add now, or one revoked; docs/E2EE.md, Part 4, "Told of a new
    /// device"). A hint, not a fact: the conversations with `peer` check their members against
    /// the directory at their next send, and those this device is to commit in (`commitsOnHint`)
    /// check and commit now. The check reads and verifies the directory as any other does, so a
    /// hint the server made up costs a read and changes nothing the directory does not hold.
    /// Returns the groups where this device stands in for the device chosen to commit
    /// (`deputyRank`), for the engine to time (`KeysDeputies`).
    func keysChanged(of peer: String, client: SIMPClient) async -> [KeysDeputies.Duty] {
        // One check per peer at a time: a hint that comes meanwhile makes one more after it,
        // however many come (a server sending them in a loop gets checks one after another).
        if hints[peer] != nil {
            hints[peer] = true
            return []
        }
        var duties: Set<KeysDeputies.Duty> = []
        repeat {
            hints[peer] = false
            duties.formUnion(await checkConversations(with: peer, client: client))
        } while hints[peer] == true
        hints[peer] = nil
        return Array(duties)
    }

    private func checkConversations(with peer: String, client: SIMPClient) async -> [KeysDeputies.Duty] {
        var duties: [KeysDeputies.Duty] = []
        for conversation in (try? store.conversationsWithGroups()) ?? [] {
            // A one-to-one conversation's users are its name's and this one: no state to read.
            var members: [(leaf: LeafIndex, user: String, mine: Bool)] = []
            if GroupName.addressed(by: conversation) != nil {
                guard let group = (try? loadedOrSaved(conversation)) ?? nil else { continue }
                members = Self.leafUsers(group)
            }
            guard let commit = Self.commitsOnHint(about: peer, in: conversation, user: user, members: members) else { continue }
            if !commit, let rank = Self.deputyRank(about: peer, members: members) {
                duties.append(KeysDeputies.Duty(peer: peer, conversation: conversation, rank: rank))
            }
            await membersChanged(conversation, client: client, commit: commit)
        }
        return duties
    }

    /// This device's place after the device chosen to commit a hint about `peer` in a group
    /// (`commitsOnHint`): 1 for the next leaf that is not `peer`'s, and so on; nil when it is
    /// past `KeysDeputies.ranks` (or is the chosen one, or holds no leaf).
    static func deputyRank(about peer: String, members: [(leaf: LeafIndex, user: String, mine: Bool)]) -> Int? {
        let others = members.filter { $0.user != peer }
        guard let place = others.firstIndex(where: \.mine), KeysDeputies.ranks.contains(place) else { return nil }
        return place
    }

    /// A deputy's duty fell due (`KeysDeputies`): the group fetches the commits made since this
    /// device last read its order (the chosen device's, if it was online), then commits what
    /// the directory holds of the hint's peer and the group still lacks, if anything.
    func standIn(about peer: String, in conversation: String, client: SIMPClient) async {
        do {
            try await setUp(conversation, client: client, creating: false)
            try await catchUp(conversation, client: client)
        } catch {
            // The next send checks the members, as for any hint this device did not commit.
            return
        }
        await membersChanged(conversation, client: client, commit: true)
    }

    /// The peers whose KEYS hint is being checked, and whether another came meanwhile.
    private var hints: [String: Bool] = [:]

    /// The group this device holds for `conversation`: loaded, or read from disk (not kept).
    private func loadedOrSaved(_ conversation: String) throws -> MLSGroup? {
        if let group = groups[conversation] { return group }
        guard let saved = try store.groupState(of: conversation) else { return nil }
        return try MLSGroup(savedState: saved, credentialValidator: nil, proposalApprover: nil)
    }

    /// Each leaf's user, by leaf index (a leaf whose credential names no user is left out).
    static func leafUsers(_ group: MLSGroup) -> [(leaf: LeafIndex, user: String, mine: Bool)] {
        memberDevices(group).sorted { $0.key < $1.key }.compactMap { leaf, device in
            KeyDirectoryRules.user(ofCredentialIdentity: device.identity).map { (leaf, $0, leaf == group.myLeaf) }
        }
    }

    /// Whether this device commits a hint about `peer`'s keys in `conversation` now (true), only
    /// checks at its next send (false), or has nothing to do there (nil: `peer` holds no leaf and
    /// is not this user). Few devices commit, so that a hint to a large group is not a race of
    /// every member's devices for one epoch: in a one-to-one conversation every device of its two
    /// users (a handful); in a group, the devices of `peer` itself when it is this user (a device
    /// just linked, its siblings add it), and otherwise only the member device of the lowest
    /// leaf that is not `peer`'s. If that device is away, the next three stand in, one after
    /// another (`deputyRank`, `KeysDeputies`); if they are away too, the next send of any
    /// member commits.
    static func commitsOnHint(about peer: String, in conversation: String, user: String,
                              members: [(leaf: LeafIndex, user: String, mine: Bool)]) -> Bool? {
        let involved = peer == user || members.contains { $0.user == peer } || conversation == peer
        guard involved else { return nil }
        if GroupName.addressed(by: conversation) == nil || peer == user { return true }
        return members.first { $0.user != peer }?.mine ?? false
    }

    /// A change of a group's members this device was told of (`ClientEvent.groupChanged`). The
    /// next send checks the members at once; and when the change is an invitee's acceptance of
    /// this user's invitation (an `added` entry the server writes in the inviter's name), this
    /// device commits the new member's devices in now: an invitee cannot add itself (MLS
    /// external commits are not used), and otherwise could not write until some member sent.
    func groupChanged(_ conversation: String, _ change: GroupChange, client: SIMPClient) async {
        let accepted = change.kind == .added && change.by == user && change.member != user
        await membersChanged(conversation, client: client, commit: accepted)
    }

    /// A group's members changed (this user's request, or a change it was told of): the next
    /// send checks them against the key directory at once, not after `checkInterval`. With
    /// `commit` (this device made the change), a group this device has follows now: the added
    /// members' devices get their Welcomes, the removed ones' leaves go.
    func membersChanged(_ conversation: String, client: SIMPClient, commit: Bool) async {
        checkMembersNext(conversation)
        guard commit, groups[conversation] != nil || (try? store.groupState(of: conversation)) != nil else { return }
        do {
            try await setUp(conversation, client: client, creating: false)
            try await syncMembers(conversation, client: client)
        } catch {
            // The next send tries again (and says why it cannot).
        }
    }

    private func storeCall<T>(_ body: () throws -> T) throws(ClientError) -> T {
        do { return try body() } catch { throw ClientError("cannot use the keys in \(store.path): \(error)", code: .endToEnd) }
    }

    static func clientError(_ error: any Error) -> ClientError {
        if let error = error as? ClientError { return error }
        if let failure = error as? OpenFailure {
            // Its cause kept: a message that fails in `setUp` is counted as what it is.
            var wrapped = ClientError(reason(failure), code: .endToEnd)
            wrapped.decryptionFailure = cause(failure)
            return wrapped
        }
        return ClientError("end-to-end encryption failed: \(error)", code: .endToEnd)
    }
}
