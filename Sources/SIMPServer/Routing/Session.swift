import Crypto
import Logging
import NIOCore
import SIMPCore

/// One connected device of a user on this node: its validated UDP address, and the datagrams
/// it has not yet confirmed. Held by the delivery engine (its control connection stays with
/// the router, by the session's id); confined to the router's event loop.
final class Session: TableEntry, SealedPeer, @unchecked Sendable {
    let id: UInt64
    let user: String
    let device: String
    /// How many devices the user has, as last heard (CONNECT, or a notice from another node's
    /// CONNECT): with more than one, what this device sends is copied for the others.
    var devices = 1
    /// The validated source address (nothing is sent before there is one) and its challenges.
    var path: PathValidator
    /// This device's confirmed mark: the highest seq it has confirmed, as the client said at
    /// CONNECT or the server had, then raised by its receipts (a repeat is not written again).
    /// The inbox is read after it.
    var deviceMark: UInt64
    /// Seals every datagram of this session, both ways; handed to the client over TCP.
    let key: SymmetricKey
    var replay = ReplayWindow()
    /// On UDP: push timeouts since the client's last receipt or datagram over UDP; when UDP
    /// has gone quiet the session moves to the stream (docs/PROTOCOL.md, Losing UDP).
    var udpSilence = UDPSilence(now: .distantPast)
    var pushes: PushQueue
    /// Puts this session's sends back into the client's order before they are stored.
    var sendOrder = SendOrderGate<StoreRequest>()
    var nextPacketNumber: UInt64 = 1
    /// When its presence was last written or renewed: a keepalive renews it a third of the TTL later.
    var lastPresenceWrite: NIODeadline = .distantPast
    /// Data datagrams this session may still send now (docs/SECURITY.md, messages per second).
    var bucket: TokenBucket
    /// TYPING datagrams it may still relay now (`DeliveryEngine.typingRate`); made at its first.
    var typingBucket: TokenBucket?
    /// When each kind of limit error was last sent: at most one a second per kind.
    var lastLimitError: [Simp_ErrorCode: NIODeadline] = [:]
    /// Bytes this session may still have resent on its receipts' `missing` lists (made on the
    /// first such resend): the resends a receipt asks for cost what they send.
    var resendBudget: TokenBucket?
    /// An inbox read for seqs its receipts named and this node never pushed is in flight.
    var readingMissing = false
    /// The send order's numbers looked at for `missing` reports since the last full one.
    var missingCheckedUpTo: UInt64 = 0
    var lastFullMissingAt: NIODeadline = .distantPast
    /// The highest seq pushed to this session. Seqs are given in Redis in commit order, so
    /// an inbox read that saw this one saw every lower one too: catching up after another
    /// node's notice reads only above it.
    var highestPushed: UInt64 = 0
    /// Its inbox reads after notices and doubts: until one covers a doubt, nothing goes early,
    /// since an early message could overtake the seq in doubt.
    var catchUp = CatchUp()
    /// The client said at CONNECT that it reads BUNDLE datagrams.
    var takesBundles = false
    /// The client said at CONNECT that it takes EARLY datagrams.
    var takesEarly = false
    /// The inbox read after the bind came back: everything stored before it was pushed.
    var synced = false
    /// The highest seq this client has seen or will see (its `lastSeq`, then every seq stored
    /// for it): stores pass it to Redis so numbering never goes below it, even after Redis
    /// lost its latest writes. Set at CONNECT, before the numbering check is sent to Redis.
    var numberingFloor: UInt64?

    func raiseNumberingFloor(_ seq: UInt64) {
        guard let floor = numberingFloor, seq > floor else { return }
        numberingFloor = seq
    }

    /// `bindToken` is the single-use token a bind datagram must present; `key` seals its
    /// datagrams; both are handed to the client over TCP.
    init(id: UInt64, user: String, device: String, bindToken: [UInt8], key: SymmetricKey, deviceMark: UInt64, policy: RetransmitPolicy,
         bucket: TokenBucket) {
        self.key = key
        self.bucket = bucket
        self.id = id
        self.user = user
        self.device = device
        self.path = PathValidator(bindToken: bindToken)
        self.deviceMark = deviceMark
        self.pushes = PushQueue(policy: policy)
    }

    var address: SocketAddress? { path.address }
    var isBound: Bool { path.isBound }
    /// The path its datagrams take once bound.
    var datagramPath: DatagramPath? {
        switch path.route {
        case .udp: .udp
        case .stream: .stream
        case nil: nil
        }
    }

    func takePacketNumber() -> UInt64 {
        defer { nextPacketNumber += 1 }
        return nextPacketNumber
    }
}

extension Session {
    /// Who a log line is about. Only the user name and the session id: the bind token and
    /// the key are secrets and never go to a log.
    var logMetadata: Logger.Metadata {
        ["user": "\(user)", "device": "\(device)", "session": "\(id)"]
    }
}
