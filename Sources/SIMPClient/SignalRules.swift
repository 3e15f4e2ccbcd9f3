import CoreMetrics
import SIMPCore

/// Read receipts and typing in encrypted conversations (docs/E2EE.md, Part 7), pure: which form
/// a read mark or a typing goes in, and whether one that came is shown or dropped. A
/// conversation is *encrypted* when this device holds its MLS group; there, only what opens in
/// the group is taken, and nothing is sent in the clear.
enum SignalRules {
    /// What an encrypted conversation's receipt or typing was dropped for (counted,
    /// `SIMPClient.droppedSignals()`).
    enum Drop: String, CaseIterable, Sendable {
        /// Plain (unsealed) in a conversation this device holds an MLS group for: the server, or
        /// a client that does not encrypt, could have made it.
        case unsealed
        /// Sealed, but it did not open in the conversation's group (forged, another group's, an
        /// epoch not kept, the wrong sender or content), or this device has no group for it.
        case unopened
    }

    enum Kind: String, CaseIterable, Sendable {
        case typing, read
    }

    // MARK: typing

    /// What the engine does with a TYPING datagram's body.
    enum TypingStep: Equatable {
        /// Shown at once: a plain typing to a client that does not encrypt (as before Part 7).
        case show(from: String)
        /// Handed to the conversation's keys (`verdict`): whether the conversation is encrypted,
        /// and whether a sealed one opens, decide.
        case check(SealedSignals.TypingBody)
        case drop(Drop)
    }

    static func typingStep(_ body: SealedSignals.TypingBody, endToEnd: Bool) -> TypingStep {
        if endToEnd { return .check(body) }
        return body.sealed == nil ? .show(from: body.user) : .drop(.unopened)
    }

    /// What a sealed signal opened to in the conversation's group: the sender's user (its leaf's
    /// credential) and the inner message's type; nil when it did not open.
    struct Opened: Equatable {
        var sender: String
        var type: Simp_Message.MessageType
    }

    /// Shown, or dropped and why. `encrypted`: this device holds the conversation's group.
    enum Verdict: Equatable {
        case show
        case drop(Drop)
    }

    /// A typing from `body.user`: plain, shown only where the conversation is not encrypted;
    /// sealed, only when it opened in the group, from a device of that user, to a TYPING.
    static func typingVerdict(_ body: SealedSignals.TypingBody, encrypted: Bool, opened: Opened?) -> Verdict {
        guard body.sealed != nil else { return encrypted ? .drop(.unsealed) : .show }
        guard encrypted, let opened, opened.sender == body.user,
              SealedSignals.innerFits(outer: nil, inner: opened.type) else { return .drop(.unopened) }
        return .show
    }

    /// How to tell `peer` the user is typing.
    enum TypingForm: Equatable {
        case plain
        case sealed([UInt8])
        /// Not at all: the conversation is encrypted and the typing could not be sealed (never
        /// in the clear instead).
        case none
    }

    static func typingForm(endToEnd: Bool, encrypted: Bool, sealed: [UInt8]?) -> TypingForm {
        guard endToEnd, encrypted else { return .plain }
        return sealed.map { .sealed($0) } ?? .none
    }

    // MARK: read receipts

    /// A plain READ notice from the server: taken unless it concerns a conversation (one-to-one,
    /// or the group `#NAME` its notice names) this device holds an MLS group for: then only a
    /// sealed read counts.
    static func plainReadVerdict(encrypted: Bool) -> Verdict {
        encrypted ? .drop(.unsealed) : .show
    }

    /// A group's sealed read (`SEALED_READ` to `SENDER#NAME`) that opened, as this user takes
    /// it: in the sender's inbox, the group's read of the user's messages (`to` `#NAME`, as a
    /// plain group READ notice names it); the reader's own copy, for its other devices, names
    /// the sender (a device knows a message by its sender and id). Nil when it is neither: a
    /// read of another user's messages stored in this user's inbox.
    static func groupReadAddressing(_ address: SealedSignals.ReadAddress, from reader: String,
                                    user: String) -> (to: String, group: String?)? {
        guard let group = address.group else { return nil }
        if reader == user { return (address.sender, nil) }
        guard address.sender == user else { return nil }
        return (GroupName.address(group), group)
    }

    /// Whether `reads` more reads may be sealed in a group by a device that sealed `sealed`
    /// messages since its last Update. The group's other members never see a read's
    /// generation: the device's next text is as far ahead of the next one they expect as the
    /// generations it used since (at most `sealed` in this epoch: the text is generation
    /// `sealed + reads` at most), and a member opens one at most `maximumForwardDistance`
    /// ahead. The Update due after 1,000 keeps this true; when it could not be made (a lost
    /// race, a commit this device refuses), reads stop before they would make the next text
    /// undecryptable (docs/E2EE.md, Part 7, "Generations").
    static func groupReadsFit(_ reads: Int, sealedSinceUpdate sealed: Int, maximumForwardDistance: UInt32) -> Bool {
        sealed + reads <= Int(maximumForwardDistance)
    }

    /// Whether a sealed read's ids may be taken: none of them names a message this device knows
    /// it sent somewhere else than the read's conversation (`knownTo`: where each message it
    /// knows went; the conversation: the reader for a one-to-one read, `#NAME` for a group's).
    /// A read of another conversation's messages is one its reader could not have made: the
    /// whole read is dropped.
    static func readNamesOnly(_ ids: [String], of conversation: String, knownTo: (String) -> String?) -> Bool {
        ids.allSatisfy { id in knownTo(id).map { $0 == conversation } ?? true }
    }

    /// Read marks split by how they are told: marks of a conversation this device holds an MLS
    /// group for go sealed to their sender (its ids in chunks that fit one sealed message),
    /// one-to-one ones to `SENDER`, a group's to `SENDER#NAME` (sealed in the group's MLS group,
    /// told to the sender alone); the others in `markRead` as before.
    struct Routed: Equatable {
        var plain: [Simp_ReadMark] = []
        /// Per recipient (`SealedSignals.ReadAddress.toUser`, in the order first named), the ids
        /// read, in chunks.
        var sealed: [(peer: String, ids: [String])] = []

        static func == (a: Routed, b: Routed) -> Bool {
            a.plain == b.plain && a.sealed.map(\.peer) == b.sealed.map(\.peer) && a.sealed.map(\.ids) == b.sealed.map(\.ids)
        }
    }

    /// The most bytes of ids (with their separating spaces) one sealed read carries: a sealed
    /// part's text.
    static let idsPerSealedRead = SealedText.partBytes

    static func route(_ marks: [Simp_ReadMark], endToEnd: Bool, encrypted: Set<String>) -> Routed {
        var routed = Routed()
        var order: [String] = []
        var byPeer: [String: [String]] = [:]
        for mark in marks {
            let address = SealedSignals.ReadAddress(sender: mark.fromUser, group: mark.group.isEmpty ? nil : mark.group)
            guard endToEnd, encrypted.contains(address.conversation) else {
                routed.plain.append(mark)
                continue
            }
            let peer = address.toUser
            if byPeer[peer] == nil { order.append(peer) }
            if !(byPeer[peer]?.contains(mark.messageID) ?? false) { byPeer[peer, default: []].append(mark.messageID) }
        }
        for peer in order {
            var chunk: [String] = []
            var bytes = 0
            for id in byPeer[peer]! {
                let size = id.utf8.count + (chunk.isEmpty ? 0 : 1)
                if !chunk.isEmpty, bytes + size > idsPerSealedRead {
                    routed.sealed.append((peer, chunk))
                    chunk = []
                    bytes = 0
                }
                bytes += id.utf8.count + (chunk.isEmpty ? 0 : 1)
                chunk.append(id)
            }
            if !chunk.isEmpty { routed.sealed.append((peer, chunk)) }
        }
        return routed
    }
}

/// Receipts and typing of encrypted conversations dropped, by kind and why (docs/E2EE.md,
/// Part 7): read by the application (`SIMPClient.droppedSignals()`), and counted as the metric
/// `simp_client_signals_dropped_total{kind,reason}` through swift-metrics.
final class DroppedSignals: Sendable {
    struct Key: Hashable, Sendable {
        var kind: SignalRules.Kind
        var reason: SignalRules.Drop
    }

    private let counts = Locked<[Key: Int]>([:])
    private let counters: [Key: Counter] = {
        var all: [Key: Counter] = [:]
        for kind in SignalRules.Kind.allCases {
            for reason in SignalRules.Drop.allCases {
                all[Key(kind: kind, reason: reason)] = Counter(label: "simp_client_signals_dropped_total",
                                                               dimensions: [("kind", kind.rawValue), ("reason", reason.rawValue)])
            }
        }
        return all
    }()

    func count(_ kind: SignalRules.Kind, _ reason: SignalRules.Drop) {
        let key = Key(kind: kind, reason: reason)
        counts.withLock { $0[key, default: 0] += 1 }
        counters[key]?.increment()
    }

    var all: [Key: Int] { counts.value }
}

extension SIMPClient {
    /// How many read receipts and typing signals of encrypted conversations this client dropped
    /// since it was made: plain ones where the conversation is encrypted (`unsealed`), sealed
    /// ones that did not open in its group (`unopened`). Keyed "KIND/REASON" ("typing/unsealed").
    public func droppedSignals() -> [String: Int] {
        Dictionary(uniqueKeysWithValues: droppedSignalCounts.all.map { ("\($0.key.kind.rawValue)/\($0.key.reason.rawValue)", $0.value) })
    }
}
