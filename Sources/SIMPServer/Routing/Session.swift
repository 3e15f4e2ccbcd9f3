import Crypto
import NIOCore
import SIMPCore

/// One connected client on this node: its control channel, its validated UDP address,
/// and the datagrams it has not yet confirmed. Confined to the router's event loop,
/// which is why it may be captured by the future callbacks that run there.
final class Session: @unchecked Sendable {
    let id: UInt64
    let user: String
    let control: any Channel
    /// Single use: cleared once a bind datagram presented it.
    var bindToken: [UInt8]
    /// The observed source address of the bind datagram; nothing is sent before it is set.
    var address: SocketAddress?
    /// The client's highest confirmed seq when it connected; sync starts after it.
    var syncFloor: UInt64
    /// Seals every datagram of this session, both ways; handed to the client over TCP.
    let key = DatagramSeal.newKey()
    var replay = ReplayWindow()
    /// Plaintext of unconfirmed pushes: each resend is sealed again under a new packet number.
    var outbound: RetransmitQueue<UInt64, [UInt8]>
    /// Pushes given up on (the path looked dead): pushed again once the client's next
    /// keepalive shows the path works, instead of waiting for a reconnect.
    var parked: [UInt64: [UInt8]] = [:]
    /// Puts this session's sends back into the client's order before they are stored.
    var sendOrder = SendOrderGate<StoreRequest>()
    var nextPacketNumber: UInt64 = 1
    var lastPresenceWrite: NIODeadline = .distantPast
    /// A new source address that sent us something and the token we challenge it with.
    var pathChallenge: PathChallenge?
    /// Data datagrams this session may still send now (docs/SECURITY.md, messages per second).
    var bucket: TokenBucket
    /// When each kind of limit error was last sent: at most one a second per kind.
    var lastLimitError: [Simp_ErrorCode: NIODeadline] = [:]
    var lastMissingReported: UInt64 = 0
    var lastMissingAt: NIODeadline = .distantPast
    /// Highest receipt already passed to the store; repeats are not written again.
    var lastReceipt: UInt64 = 0

    init(id: UInt64, user: String, control: any Channel, bindToken: [UInt8], syncFloor: UInt64, policy: RetransmitPolicy,
         bucket: TokenBucket) {
        self.bucket = bucket
        self.id = id
        self.user = user
        self.control = control
        self.bindToken = bindToken
        self.syncFloor = syncFloor
        self.outbound = RetransmitQueue(policy: policy)
    }

    var isBound: Bool { address != nil }

    func takePacketNumber() -> UInt64 {
        defer { nextPacketNumber += 1 }
        return nextPacketNumber
    }
}

/// An unvalidated source address of a session, the token it is challenged with, and what it
/// may still be sent.
struct PathChallenge {
    let address: SocketAddress
    let token: [UInt8]
    var sentAt: NIODeadline = .distantPast
    var budget = AmplificationBudget()
}
