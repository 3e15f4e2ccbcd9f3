import Foundation
import SIMPCore

/// One server node the client may connect to: its control (TCP) address. The datagram port
/// is the one the node names when the session opens.
public struct ServerAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// HOST:PORT, with an IPv6 address in brackets.
    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

public struct ClientConfiguration: Sendable {
    /// The nodes of one deployment (sharing one Redis), tried in this order: `connect` starts
    /// with the one that last worked; after a lost connection the client tries the next ones
    /// in turn (see `ServerRotation`). To spread the clients of a lost node over the others,
    /// give clients the list in different orders. Never empty for a client that connects.
    public var servers: [ServerAddress]
    /// The first server's host; setting it changes only the first server.
    public var host: String {
        get { servers.first?.host ?? "" }
        set { setFirst(ServerAddress(host: newValue, port: port)) }
    }
    /// The first server's port; setting it changes only the first server.
    public var port: Int {
        get { servers.first?.port ?? 0 }
        set { setFirst(ServerAddress(host: host, port: newValue)) }
    }
    /// A TCP connect to a node that does not answer at all (its host is down) gives up after
    /// this, so the next node is tried soon; long enough for the SYN to be sent three times.
    public var connectTimeout: Duration = .seconds(5)
    /// Reconnect delays grow as base * 2^attempt up to cap, each scaled by a random 0.5-1.0.
    public var reconnectBase: Duration = .seconds(2)
    public var reconnectCap: Duration = .seconds(64)
    /// Unaccepted datagrams are resent with backoff: the wait doubles on every resend, up to this.
    public var retransmitBackoffCap: Duration = .seconds(4)
    /// A message the server has not accepted this long after its first send has failed.
    public var giveUpAfter: Duration = .seconds(30)
    /// How often a bound session sends a UDP keepalive (holding the NAT mapping).
    public var keepaliveInterval: Duration = .seconds(25)
    /// How soon an unconfirmed UDP bind is sent again.
    public var bindRetry: Duration = .milliseconds(250)
    /// `.auto`: when UDP does not answer the BIND, datagrams travel inside the control
    /// connection (and move to UDP once it answers); `.never`: UDP only, as `simp
    /// --datagrams-over-stream never` asks.
    public var datagramsOverStream = DatagramsOverStream.auto
    /// A request the server has not answered in this long fails.
    public var requestTimeout: Duration = .seconds(10)
    /// The longest control frame taken from the server, in bytes.
    public var maxFrameLength: Int = ClientConfiguration.defaultMaxFrameLength
    /// Send datagrams to this port instead of the one the server names (a relay or a test
    /// proxy), whichever server the session is on.
    public var udpPortOverride: Int?
    /// Keep the outbox, the confirmed sequence and received messages in DIR/USER.sqlite, so a
    /// restarted client resends what the server never accepted and shows nothing twice.
    /// What the disk does not take (it is full) is neither sent nor confirmed: `send` throws,
    /// and a received message is shown and confirmed only once written (an `.error` event
    /// says it could not be; the server sends it again). Sending needs `connect` first.
    /// It also keeps the local history the application reads, offline too (`openHistory`,
    /// `messages(in:before:limit:)`, `conversations()`, `markShown`): received messages and
    /// the user's own with their status (`MessageStatus`). Its schema is migrated on open.
    public var dataDirectory: String?
    /// TLS on the control channel; nil talks plain TCP (a server for local development).
    public var tls: ClientTLS?
    /// Without `tls`, send the password and login tokens in clear to a server that is not this
    /// machine (`ServerAddress.isLoopback`), where anyone on the path can read them. Off (the
    /// default), `connect` and `register` refuse such a server before opening any connection.
    public var allowPlaintext = false
    /// Take a message before the server has stored it, when nothing else is under way for
    /// this client (docs/PROTOCOL.md, Early delivery): it arrives a Redis round trip sooner,
    /// with `seq` 0, and is not handed over again when its numbered copy follows. If its
    /// store then fails, `.retracted` says so. Not with a `dataDirectory`, which keeps
    /// received messages by seq.
    public var earlyDelivery = false
    /// **Delivered** means shown: the client confirms a message to the server (so its sender
    /// hears `delivered`) only once the application said it showed it, with `markShown(in:)`
    /// (a `dataDirectory`'s history) or `markRead(_:)`. Until then the message is held: the
    /// server stops pushing it, but it stays in the inbox, counts against its sender's
    /// unconfirmed messages, and comes again in the next session if the process ends first
    /// (with a `dataDirectory`, messages the history still counts unread stay held across a
    /// restart). Confirmation is cumulative, so one message not shown holds its senders'
    /// `delivered` for those after it too. Read receipts are unchanged: a user with them off
    /// tells no one what was read, but still confirms what was shown. Off (the default), a
    /// message counts as delivered once handed over (and, with a `dataDirectory`, saved).
    /// Takes nothing early (`earlyDelivery`).
    public var confirmWhenShown = false
    /// End-to-end encrypt one-to-one conversations (docs/E2EE.md, Part 4): needs a
    /// `dataDirectory` (the keys live there) and an identity (`SIMPClient.setUpIdentity`,
    /// which also uploads this device's KeyPackages, with or without this). Texts and images to a user go
    /// sealed in the conversation's MLS group, made on the first send; the server stores and
    /// forwards only ciphertext. A peer without keys cannot be sent to (`.endToEnd`), nor a
    /// user who does not exist (`.unknownUser`, "no such user"); a
    /// verified peer whose identity changed neither (`.identityChanged`) until verified again.
    /// Groups too: each is an MLS group of its members' devices. Sealed messages received are
    /// decrypted whatever this says.
    ///
    /// Off by default, because it needs a `dataDirectory` the application chooses. A server
    /// keeps its default, `--e2e required`, unless its operator chose `optional`: there a
    /// client with this off logs in, but what it sends is refused: a text or image fails
    /// (`MessageStatus.failure`, code `.e2eRequired`: "this server takes only end-to-end
    /// encrypted messages"), `markRead` throws it, and typing is dropped. `simp` turns this on,
    /// with a data directory of its own, unless told `--no-e2e`.
    public var endToEnd = false
    /// With `endToEnd`: a send checks the conversation's devices against the key directory (and
    /// the peer's identity against the one pinned) when the last check is older than this, and
    /// adds or removes devices by commit. Zero: before every send.
    public var directoryCheckInterval: Duration = .seconds(1)
    /// Send under a congestion window and pacing (docs/PROTOCOL.md, Congestion control): what
    /// the path does not take waits in the client, and a loss the server reports slows it.
    /// Off, every message leaves at once and only the retransmit timers and the server's
    /// `missing` recover what a link dropped.
    public var congestionControl = true
    /// Events come in `eventBatches`, everything one turn of the client's event loop made in
    /// one array, instead of one at a time in `events`: a consumer busy with many events is
    /// woken once per batch, not once per event.
    public var eventBatches = false
    /// Which of the user's devices this client is (`DeviceName`: 1-16 of a-z, 0-9, '.', '_',
    /// '-'). Every device gets every message to its user, and what one sends appears on the
    /// others; a second client with the same device name replaces the first. nil: the name kept
    /// in the data directory (made once, so one installation is one device), else "default".
    public var device: String?

    /// One server.
    public init(host: String = "127.0.0.1", port: Int = 7700) {
        servers = [ServerAddress(host: host, port: port)]
    }

    /// Several nodes of one deployment, in the order to try them.
    public init(servers: [ServerAddress]) {
        self.servers = servers
    }

    private mutating func setFirst(_ server: ServerAddress) {
        if servers.isEmpty { servers = [server] } else { servers[0] = server }
    }
}

/// How the client checks the server's TLS certificate.
public struct ClientTLS: Sendable {
    /// PEM file of the certificate authority (or the self-signed certificate) to trust;
    /// nil trusts the system's roots.
    public var caFile: String?
    /// The name every server's certificate must carry; nil: the host of the server connected
    /// to (an IP address is then matched against the certificate's IP entries).
    public var serverName: String?

    public init(caFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.serverName = serverName
    }
}

/// A message handed to the application: once, in order of `seq`; with `earlyDelivery`, an
/// early one has `seq` 0 and comes as soon as it reached the server.
public struct IncomingMessage: Sendable, Equatable {
    public var id: String
    public var from: String
    /// The user it was sent to: the receiving user, unless it is a message its user sent from
    /// another device (then `fromDevice` names that device).
    public var to: String
    /// For a message its user sent from another device: that device; else empty.
    public var fromDevice: String
    public var text: String
    public var seq: UInt64
    /// An image message's image (it travels as a URL); nil for others.
    public var imageURL: URL? {
        get { imageLink.flatMap(URL.init(string:)) }
        set { imageLink = newValue?.absoluteString }
    }
    /// When its sender sent it, by the sender's clock.
    public var sentAt: Date {
        get { Date(millis: sentMillis) }
        set { sentMillis = newValue.millis }
    }
    /// When the server stored it; nil for one handed over early, before it was stored.
    public var storedAt: Date? {
        get { Date.ifSet(millis: storedMillis) }
        set { storedMillis = newValue?.millis ?? 0 }
    }
    /// As the wire and the store keep them.
    var imageLink: String?
    var sentMillis: Int64
    var storedMillis: Int64
    /// A group message (`to` is `#NAME`): the group, and its place in the group's order (the
    /// same on every member's devices). Nil and 0 otherwise.
    public var group: String?
    public var groupSeq: UInt64 = 0
    /// A group's membership change, in the group's order (then `text` is empty).
    public var groupChange: GroupChange?
    /// A notice about contacts rather than a message (then `text` is empty).
    public var kind: Kind = .message
    /// How many parts a long message came in (docs/PROTOCOL.md, Long messages); 1 for others.
    public var parts = 1
    /// A part of a long message, not yet put together with the others (`Reassembly`).
    var part: LongText.PartID?
    /// It came end-to-end encrypted (docs/E2EE.md, Part 4) and this device decrypted it.
    public var encrypted = false
    /// Still sealed (type SEALED or SEALED_READ): `text` holds the ciphertext in base64 until it is opened.
    var sealed = false
    /// It came as a SEALED_READ: opened, it must hold a READ (and is one).
    var sealedRead = false
    /// A plain READ of an encrypted conversation (`SignalRules.plainReadVerdict`): dropped, counted.
    var droppedSignal: SignalRules.Drop?
    /// Of a type this client does not know (a later protocol's): confirmed, never shown as a text.
    var unknownType = false
    /// A KEYS_CHANGED notice: `from`'s key directory changed. Checked, never shown.
    var keysChanged = false
    /// Why a sealed message did not open (`ConversationKeys.open`); nil if it was not tried.
    var unopened: String?
    var unopenedCause: DecryptionFailure?

    /// A sealed message opened: what its sender wrote, from the decrypted `inner` message.
    mutating func unseal(_ inner: Simp_Message) {
        text = inner.content
        if inner.type == .read { kind = .read }
        imageLink = inner.type == .image ? inner.imageURL : nil
        part = inner.type == .textPart ? LongText.PartID(id) : nil
        sealed = false
        encrypted = true
    }

    /// The id a read mark names: a long message's last part (the entry at `seq`).
    var markID: String {
        parts > 1 ? LongText.PartID(base: id, index: parts, count: parts).description : id
    }

    public enum Kind: String, Sendable, Equatable {
        case message, contactRequest = "contact-request", contactAccepted = "contact-accepted", read
        /// `from` invited the user to the group `text` names ("#NAME").
        case groupInvited = "group-invited"
    }

    /// What a notice says, as a conversation's history shows it (nil for a message).
    public var noticeText: String? {
        switch kind {
        case .message: nil
        case .contactRequest: "\(from) asked \(to) to be a contact"
        case .contactAccepted: "\(from) accepted \(to) as a contact"
        case .read: "\(from) read \(text.split(separator: " ").count) of \(to)'s messages"
        case .groupInvited: "\(from) invited \(to) to \(text)"
        }
    }

    init(_ m: Simp_Message) {
        id = m.messageID
        from = m.fromUser
        to = m.toUser
        fromDevice = m.fromDevice
        text = m.content
        imageLink = m.type == .image ? m.imageURL : nil
        seq = m.seq
        sentMillis = m.time
        storedMillis = m.serverTime
        group = GroupName.addressed(by: m.toUser)
        groupSeq = m.groupSeq
        groupChange = GroupChange(m)
        part = m.type == .textPart ? LongText.PartID(m.messageID) : nil
        sealed = m.type == .sealed || m.type == .sealedRead
        sealedRead = m.type == .sealedRead
        if case .UNRECOGNIZED = m.type { unknownType = true }
        keysChanged = m.type == .keysChanged
        kind = switch m.type {
        case .contactRequest: .contactRequest
        case .contactAccepted: .contactAccepted
        case .read: .read
        case .groupInvited: .groupInvited
        default: .message
        }
    }
}

/// Someone joined or left a group: `member` was added or removed by `by`, or left.
public struct GroupChange: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case added, removed, left
    }

    public var kind: Kind
    public var member: String
    public var by: String

    public init(kind: Kind, member: String, by: String) {
        self.kind = kind
        self.member = member
        self.by = by
    }

    /// The change a message is the entry of, if it is one.
    init?(_ message: Simp_Message) {
        switch message.type {
        case .groupAdded: kind = .added
        case .groupRemoved: kind = .removed
        case .groupLeft: kind = .left
        default: return nil
        }
        member = message.content
        by = message.fromUser
    }
}

/// A group as `SIMPClient.groupMembers` and the changes answer it: its members and their roles.
public struct GroupInfo: Sendable, Equatable {
    public var name: String
    /// By name.
    public var members: [GroupMember]
    /// The place in the group's order of the last change a request made.
    public var seq: UInt64
    /// Create and add: the users invited rather than added (they join when they accept).
    public var invited: [String] = []

    /// The role of `user`; nil when it is no member.
    public func role(of user: String) -> GroupMember.Role? {
        members.first { $0.name == user }?.role
    }
}

/// One member of a group and what it may do there.
public struct GroupMember: Sendable, Equatable, Hashable {
    public enum Role: String, Sendable, Hashable, CaseIterable {
        /// Made the group; adds, removes, makes admins.
        case owner
        /// Adds and removes members.
        case admin
        case member
    }

    public var name: String
    public var role: Role

    public init(name: String, role: Role) {
        self.name = name
        self.role = role
    }
}

/// An invitation to a group waiting for the user's answer (`SIMPClient.groupInvitations`).
public struct GroupInvitation: Sendable, Equatable {
    public var group: String
    /// Who invited the user.
    public var by: String
    /// When it lapses.
    public var expires: Date
}

/// A contact's or group member's presence, as it lets the user see it (`SIMPClient.presence`).
public struct PresenceInfo: Sendable, Equatable {
    public enum State: String, Sendable {
        case online, offline
        /// It turned last-seen off, or blocked the user.
        case hidden
    }

    public var user: String
    public var state: State
    /// Its last connect or disconnect; nil when hidden or never.
    public var lastSeen: Date?

    public init(user: String, state: State, lastSeen: Date?) {
        self.user = user
        self.state = state
        self.lastSeen = lastSeen
    }
}

/// One of the user's devices (`SIMPClient.devices`).
public struct DeviceInfo: Sendable, Equatable {
    public var name: String
    /// A session of it is connected to some node.
    public var online: Bool
    /// Its last connect or disconnect, or presence renewal; nil: never.
    public var lastSeen: Date?
    /// The highest seq of the user's inbox it confirmed.
    public var confirmedSeq: UInt64
    /// It is the device asking.
    public var current: Bool

    init(_ device: Simp_Device, current: String) {
        name = device.name
        online = device.online
        lastSeen = Date.ifSet(millis: device.lastSeen)
        confirmedSeq = device.confirmedSeq
        self.current = device.name == current
    }
}

/// One page of a conversation's history (`SIMPClient.historyPage`).
public struct HistoryPage: Sendable, Equatable {
    /// Oldest first.
    public var messages: [IncomingMessage]
    /// Older messages are stored: ask for them with `before: nextBefore`.
    public var more: Bool
    /// How many messages back from the newest the next older page starts.
    public var nextBefore: UInt64
}

/// Where the client's connection stands (`SIMPClient.connectionState`,
/// `connectionStates()`), as the engine decides it.
public enum ConnectionState: Sendable, Equatable {
    /// Never connected, a `connect` failed, or `disconnect()` was called: nothing is retried.
    case disconnected
    /// The application's `connect` is under way.
    case connecting
    /// A session is open on this server and its datagram path is confirmed.
    case connected(ServerAddress)
    /// The connection was lost: attempt `attempt` (from 1) starts after `after`.
    case reconnecting(attempt: Int, after: Duration)
    /// The server ended the session for good (an administrator, a revoked device, a newer
    /// client of the same device); only a new `connect` starts another.
    case ended(reason: String)
    /// `close()` was called: the client is done.
    case closed
}

/// What happens to a client, for the application: its connection, its messages' fates, what
/// others send it. New cases come in minor versions as the protocol grows. An application that
/// handles every case ends its switch with `@unknown default:`, so that a new case is a
/// warning to handle, not a build that breaks; one that handles a few ends with `default:`:
///
/// ```swift
/// for await event in client.events() {
///     switch event {
///     case .message(let message): show(message)
///     case .eventsDropped: await reloadFromHistory()
///     default: break
///     }
/// }
/// ```
public enum ClientEvent: Sendable, Equatable {
    /// The session is bound; `path` says whether its datagrams take UDP or the control
    /// connection (UDP does not work here).
    case connected(user: String, path: DatagramPath = .udp)
    /// The session's datagrams changed path (after `connected`).
    case path(DatagramPath)
    case disconnected(reason: String)
    /// The session is over and the client will not resume it (an administrator closed it, its
    /// device was revoked, or a newer client of the same device took over); `connect` would
    /// start a new one.
    case ended(reason: String)
    /// The connection was lost: attempt `attempt` (from 1) starts after `delay`.
    case reconnecting(attempt: Int, delay: Duration)
    /// The server stored the message durably and gave it a sequence number.
    case accepted(id: String, to: String, seq: UInt64)
    /// The recipient confirmed it.
    case delivered(id: String, to: String, seq: UInt64)
    /// A message to a group (`to` is `#NAME`) is in every member's inbox, at `seq` in the
    /// group's order; `recipients` members other than the sender will confirm it.
    case groupAccepted(id: String, to: String, seq: UInt64, recipients: Int)
    /// One member of the group confirmed it (on the first of their devices).
    case memberDelivered(id: String, to: String, member: String, seq: UInt64)
    /// A membership change of a group, in the group's order.
    case groupChanged(group: String, change: GroupChange, seq: UInt64)
    /// A contact or group member came online or went offline (`state` `.online` or `.offline`,
    /// `lastSeen` when); never stored: only while connected.
    case presence(PresenceInfo)
    /// `from` is typing to the user (a few seconds' worth; nothing says it stopped).
    case typing(from: String)
    /// `from` asks the user to be a contact (`acceptContact`, `declineContact`).
    case contactRequest(from: String)
    /// `by` accepted the user's contact request.
    case contactAccepted(by: String)
    /// `by` invited the user to `group` (`acceptGroup`, `declineGroup`); on every device.
    case groupInvited(group: String, by: String)
    /// `by` read the message `id` that `from` sent: on the sender's devices after its
    /// `delivered` (for a group message: after `by`'s `memberDelivered`; `by` is the member
    /// who read it), and on the reader's other devices (then `by` is the user).
    case read(id: String, from: String, by: String)
    /// It will not be delivered; the reason says why, and `code` is the server's error code
    /// when the server refused it (nil when the client gave up: disconnected, withdrawn).
    /// `MessageStatus.failure` (`SIMPClient.sendTracked`) says the same.
    case failed(id: String, to: String, reason: String, code: ErrorCode? = nil)
    /// Indirect: a message is several times larger than any other event, and every event is
    /// copied along its way (engine, action, handler, each stream); boxed, the small events
    /// that come for every message sent (accepted, delivered) copy a third of the bytes.
    indirect case message(IncomingMessage)
    /// A message handed over early (`seq` 0) was not stored and will not come again; its
    /// sender was told it failed, for the same reason.
    case retracted(id: String, from: String, reason: String)
    /// Something went wrong outside any one request; `code` is the server's error code when
    /// the server said so (nil for the client's own: a disk write, a reconnect).
    case error(String, code: ErrorCode? = nil)
    /// This stream's consumer fell a whole buffer behind (`SIMPClient.events(bufferingNewest:)`):
    /// `count` events, the oldest, were dropped in its place. The application reads what it
    /// missed from the local history (`conversations()`, `messages(in:)`) and the statuses.
    case eventsDropped(count: Int)
    /// `user`'s identity key is not the one this device saw before (`safetyNumber(with:)`):
    /// they lost every device and made a new identity, or someone, the server included, put
    /// another key in their place. Compare the new safety number before trusting it; a
    /// verified peer is no longer verified.
    case identityChanged(user: String)
    /// A sealed message (docs/E2EE.md, Part 4) from `from` that this device could not decrypt,
    /// and why. It is confirmed (the server would push it forever otherwise) and not shown;
    /// `simp_...` counts are the application's to keep. Never silent.
    case undecryptable(from: String, id: String, reason: String)
    /// The key directory lists `device` of `user` with a certificate that does not verify under
    /// `user`'s identity key (docs/E2EE.md, Part 2): the device is not encrypted to, and its
    /// KeyPackages are not claimed. Only the server, or someone who writes to its store, puts
    /// one there: `user` never approved that device. Once per device and key while the client
    /// runs; counted (`SIMPClient.securityWarnings()`).
    case uncertifiedDevice(user: String, device: String)
    /// The commit the server's order holds for `epoch` of `conversation` ("#GROUP" or the other
    /// user) was refused by MLS (RFC 9420 section 12.4.2): handed again, out of order, a second
    /// commit for an epoch this device already left, or forged. This device stays at its epoch
    /// (no split: it never applies a second commit for an epoch) and cannot read what is sealed
    /// after that commit; `reason` says what MLS refused. Once per commit while the client
    /// runs; counted (`SIMPClient.securityWarnings()`).
    case commitRefused(conversation: String, epoch: UInt64, reason: String)
}

/// What this device refused of what the server gave it, that an honest server never gives
/// (`ClientEvent.uncertifiedDevice`, `.commitRefused`): counted by `SIMPClient.securityWarnings()`
/// and the metric `simp_client_security_warnings_total{kind}` (docs/E2EE.md, Part 4, "What a
/// malicious server can do").
public enum SecurityWarning: String, Sendable, Hashable, CaseIterable {
    /// A device certificate that does not verify under its user's identity key.
    case uncertifiedDevice = "uncertified-device"
    /// A commit of the conversation's order that MLS refused.
    case commitRefused = "commit-refused"
}

/// Why a sealed message could not be decrypted: the cause `SIMPClient.decryptionFailures()`
/// counts, and the metric `simp_client_decryption_failures_total{cause}` (docs/E2EE.md,
/// "What a device cannot open").
public enum DecryptionFailure: String, Sendable, Hashable, CaseIterable {
    /// This client keeps no keys (no data directory, or no identity on this device).
    case noKeys = "no-keys"
    /// Not a well-formed MLS application message.
    case malformed
    /// This device is not in the conversation's group (never added, or removed).
    case notInConversation = "not-in-conversation"
    /// The sender's device in the group is not the user the server names.
    case wrongSender = "wrong-sender"
    /// The id inside is not the message's.
    case wrongID = "wrong-id"
    /// MLS refused it: an epoch not kept, a key used already (a replay), a bad signature.
    case mls
    /// It was sealed after a commit of the conversation's order that this device refused
    /// (`ClientEvent.commitRefused`): the device stays at the epoch before that commit.
    case commitRefused = "commit-refused"
    /// Anything else (the data directory failed, a request for commits failed).
    case other
}

public struct ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server's error code when the server refused; nil for local failures (`errorCode`
    /// has those too).
    public var code: ErrorCode?
    public var message: String
    /// The library's own code of a local failure (`.cancelled`); `errorCode` reads both.
    var localCode: ErrorCode?
    /// Why a sealed message could not be opened, when this error says so (`ConversationKeys`).
    var decryptionFailure: DecryptionFailure?

    public init(_ message: String, code: ErrorCode? = nil) {
        self.message = message
        self.code = code
    }

    /// What a request throws when the task awaiting it is cancelled: it returns at once, and
    /// the server's answer, if one comes, is ignored. Its `errorCode` is `.cancelled`. (What the
    /// server was asked may still have been done: a cancelled `register` may have made the
    /// account.)
    public static let cancelled: ClientError = {
        var error = ClientError("cancelled")
        error.localCode = .cancelled
        return error
    }()

    /// The request was cancelled by its caller (`ClientError.cancelled`).
    public var isCancelled: Bool { localCode == .cancelled }

    public var description: String { message }

    static func server(_ error: Simp_Error) -> ClientError {
        ClientError(error.reason.isEmpty ? error.code.name : error.reason, code: ErrorCode(error.code))
    }
}

/// A login token and its expiry: a later `connect(user:token:)` logs in with it instead of the
/// password. It is a secret: whoever holds it is that user until it expires or `logout()`
/// revokes it. Coded as `value` and `expiresAt` (milliseconds since 1970).
public struct LoginToken: Sendable, Equatable, Codable {
    public var value: String
    public var expiresAt: Date {
        get { Date(millis: expiresMillis) }
        set { expiresMillis = newValue.millis }
    }
    /// As the wire says it.
    var expiresMillis: Int64

    public init(value: String, expiresAt: Date) {
        self.value = value
        expiresMillis = expiresAt.millis
    }

    init(value: String, expiresMillis: Int64) {
        self.value = value
        self.expiresMillis = expiresMillis
    }

    private enum CodingKeys: String, CodingKey {
        case value, expiresMillis = "expiresAt"
    }
}
