import Crypto
import NIOCore
import SIMPCore
import SIMPRedis

/// A batch of stores; the pipeline's lanes are senders (user names), so one sender's flood
/// takes turns with everyone else's messages.
typealias StoreBatch = StorePipeline<StoreRequest, String>.Batch

/// What the delivery engine asks its driver (the router) to do, in the order given. The
/// driver carries each out and feeds what comes back to the engine as an event; it decides
/// nothing itself.
enum DeliveryAction {
    // Control connections, by session id.
    case send(Simp_Envelope, session: UInt64)
    /// Writes the envelope, then closes the connection: the session left the table.
    case end(session: UInt64, Simp_Envelope)
    /// The session left the table (its connection closed, or a newer one replaced it).
    case closed(session: UInt64)

    // Datagrams.
    case datagram(OutgoingDatagram)
    case flushDatagrams
    /// A datagram for a session on the stream path: sealed like any, and written inside its
    /// control connection (an `Envelope{datagram}`).
    case streamDatagram(session: UInt64, header: DatagramHeader, payload: [UInt8], key: SymmetricKey)

    // A CONNECT, by the attempt the driver named it with (`DeliveryEvent.deviceRegistered`).
    /// Register the device in the store (answered with `deviceRegistered`).
    case registerDevice(attempt: UInt64, DeliveryEngine.SessionRequest, millis: Int64)
    /// The attempt's session is `session`: its control connection is that session's.
    case opened(attempt: UInt64, session: UInt64)
    /// Check the new session's numbering (answered with `numberingRepaired`).
    case repairNumbering(session: UInt64, user: String, lastSeq: UInt64)
    case connectAnswered(attempt: UInt64, Simp_ConnectResponse)
    case connectRefused(attempt: UInt64, any Error)

    // A delivery query, by the ask the driver named it with (`DeliveryEvent.deliveryQuery`).
    /// Read which of `items` their recipients confirmed (answered with `confirmedRead`).
    case readConfirmed(ask: UInt64, session: UInt64, user: String, items: [Simp_Accepted])
    /// Every `delivered` frame of the answer is queued (there may be none).
    case queryAnswered(ask: UInt64)

    // The store; each answer comes back as an event.
    /// `floors`: each recipient's numbering floor here (`Session.numberingFloor`).
    case store(StoreBatch, floors: [String: UInt64])
    case relay(StoreRequest, group: String)
    /// Ask the store whether a group's sealed read receipt's reader is a member of `group`
    /// (answered with `readerChecked`).
    case checkReader(StoreRequest, group: String)
    /// The member confirmed while its copies of these groups were held: copy on from their logs.
    case resumeGroupCopies(member: String, groups: [String])
    case markFailed(StoreRequest, code: Simp_ErrorCode)
    case probeReplicas(RedisNodeAddress)
    case readInbox(session: UInt64, user: String, after: UInt64, InboxRead)
    case readEntries(session: UInt64, user: String, seqs: [UInt64])
    case writeReceipts([ReceiptLedger.Receipt])
    case setPresence([MessageStore.Presence])
    case renewPresence([MessageStore.Presence], sessions: [UInt64])
    case clearPresence(user: String, device: String, session: UInt64, millis: Int64)
    /// Tell those who may see the user's presence that it came online or went offline.
    case announcePresence(PresenceChange)
    /// Tell the user's circle and its own devices that its key directory changed (KEYS).
    case announceKeys(user: String)
    case publish(NodeNotice, to: [String])
    /// Ask the store whether `to` takes `from`'s typing and where its devices are; relay it there.
    /// `sealed`: the MLS message of a sealed TYPING, relayed as it is.
    case routeTyping(from: String, to: String, sealed: [UInt8]? = nil)
    case publishDelivered([String: [Simp_Accepted]])

    // Time: `later` runs at the end of this loop tick, `after` when its time has come; both
    // come back as `DeliveryEvent.due`.
    case later(DeliveryEngine.Due)
    case after(TimeAmount, DeliveryEngine.Due)
    /// Every queued and in-flight store has been answered.
    case storesIdle
}

/// Why a session's inbox is read.
enum InboxRead: Hashable, Sendable {
    /// After the bind: everything stored before it.
    case sync
    /// After a notice or a doubt: what was stored since the last push (`CatchUp` numbers it).
    case catchUp(covering: UInt64)
}

/// A datagram to seal and send: the driver seals it under the session's key.
struct OutgoingDatagram {
    var header: DatagramHeader
    var payload: [UInt8]
    var key: SymmetricKey
    var address: SocketAddress
    /// Flushed at once, not with the others of this turn.
    var flush: Bool
}

/// The time an event happened, as the driver read it once: the monotonic deadline for timers
/// and the wall clock (ms since the epoch) for what is stored or shown.
struct Moment: Sendable {
    var deadline: NIODeadline
    var millis: Int64
}
