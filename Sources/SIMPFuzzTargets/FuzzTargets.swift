import Crypto
import NIOCore
import SIMPCore

/// libFuzzer targets over everything the server reads from the network before it trusts it.
/// Each takes arbitrary bytes, must never crash, and checks invariants with `precondition`,
/// so a violated invariant is a crash the fuzzer reports. `simp-fuzz` runs them (docs/SECURITY.md).
public enum FuzzTarget: String, CaseIterable, Sendable {
    case frames, datagrams, envelopes, tokens
    /// MLS (RFC 9420) messages and the ratchet tree extension: MLSFuzzTargets.swift.
    case mlsMessage = "mls-message", mlsRatchetTree = "mls-ratchet-tree"
    /// The bodies of a device link (docs/E2EE.md, "Linking a device"), as a device reads them.
    case deviceLink = "device-link"

    public func run(_ data: [UInt8]) {
        switch self {
        case .frames: FuzzTarget.frames(data)
        case .datagrams: FuzzTarget.datagrams(data)
        case .envelopes: FuzzTarget.envelopes(data)
        case .tokens: FuzzTarget.tokens(data)
        case .mlsMessage: FuzzTarget.mlsMessage(data)
        case .mlsRatchetTree: FuzzTarget.mlsRatchetTree(data)
        case .deviceLink: FuzzTarget.deviceLink(data)
        }
    }

    static let linkingDevice = LinkingDevice(user: "alice", device: "laptop")

    /// Each body decoder of a device link on the bytes: one that decodes re-encodes to them;
    /// a grant that decodes is opened (it must throw, not crash: nothing here was sealed to
    /// the device), and a reveal is checked against an offer's commitment.
    static func deviceLink(_ data: [UInt8]) {
        if let request = try? DeviceLink.Request(bytes: data) {
            precondition(request.bytes == data, "a link request does not re-encode to its bytes")
        }
        if let offer = try? DeviceLink.Offer(bytes: data) {
            precondition(offer.bytes == data, "a link offer does not re-encode to its bytes")
            _ = linkingDevice.code(for: offer)
        }
        if let reveal = try? DeviceLink.Reveal(bytes: data) {
            precondition(reveal.bytes == data, "a link reveal does not re-encode to its bytes")
            let offered = OfferedLink(user: "alice", device: "laptop", request: linkingDevice.request, identityKey: [UInt8](repeating: 1, count: 32))
            precondition((try? offered.revealed(by: reveal)) == nil || reveal == linkingDevice.reveal, "a stranger's reveal opened the commitment")
        }
        if let grant = try? DeviceLink.Grant(bytes: data) {
            precondition(grant.bytes == data, "a link grant does not re-encode to its bytes")
            let offer = DeviceLink.Offer(identityKey: [UInt8](repeating: 2, count: 32), nonce: [UInt8](repeating: 3, count: 32))
            precondition((try? linkingDevice.open(grant, offer: offer)) == nil, "a grant nobody sealed to this device opened")
        }
    }

    /// The TCP frame decoder, fed in chunks whose sizes come from the input, with a small
    /// limit so over-limit lengths are reached too. Every envelope it yields re-encodes to
    /// a frame that decodes to the same envelope.
    static func frames(_ data: [UInt8]) {
        guard let first = data.first else { return }
        var parser = FrameParser(maxLength: first & 1 == 0 ? Frame.defaultMaxLength : 512)
        var rest = data.dropFirst()
        var chunk = Int(first >> 1) + 1
        while !rest.isEmpty {
            parser.append(contentsOf: rest.prefix(chunk))
            rest = rest.dropFirst(chunk)
            chunk = chunk % 97 + 1
            do {
                while let envelope = try parser.next() { checkRoundTrip(envelope) }
            } catch {
                return  // the server answers with an error frame and closes: nothing more is read
            }
        }
        precondition(parser.bufferedBytes <= data.count, "the parser holds more bytes than it was given")
    }

    /// Compared as bytes, not values: a NaN float is never equal to itself.
    private static func checkRoundTrip(_ envelope: Simp_Envelope) {
        var reparser = FrameParser(maxLength: Int.max)
        var encoded = Frame.encode(envelope)
        let bytes = Array(encoded.readableBytesView)
        // An envelope of defaults encodes to nothing, and a zero-length frame is refused by
        // design (PROTOCOL.md): no sender produces one, so there is nothing to round-trip.
        guard bytes.count > Frame.headerSize else { return }
        reparser.append(&encoded)
        let again = (try? reparser.next()).flatMap { $0 }.map { Array(Frame.encode($0).readableBytesView) }
        precondition(again == bytes, "an envelope does not survive encode and decode")
    }

    static let key = SymmetricKey(data: [UInt8](repeating: 7, count: DatagramSeal.keySize))

    /// The datagram header decoder, the AEAD opener and the replay window on raw bytes (even
    /// first byte), and the bundle splitter, message parser and rules behind a valid seal (odd first byte).
    static func datagrams(_ data: [UInt8]) {
        guard let mode = data.first else { return }
        let body = Array(data.dropFirst())
        if mode & 1 == 0 { openRaw(body) } else { parseSealed(body, packet: UInt64(mode)) }
    }

    private static func openRaw(_ bytes: [UInt8]) {
        var buffer = ByteBuffer(bytes: bytes)
        guard let header = try? Datagram.decodeHeader(&buffer) else { return }
        precondition(buffer.readableBytes <= DatagramHeader.maxPayload + DatagramSeal.tagSize, "oversized datagram decoded")
        var window = ReplayWindow()
        let fresh = window.accept(header.packetNumber)
        precondition(!window.accept(header.packetNumber) || !fresh, "a packet number was accepted twice")
        if let payload = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toServer) {
            // Forging a tag by chance is a 2^-128 event: treat it as a broken opener.
            preconditionFailure("random bytes opened under the key: \(payload.count) bytes")
        }
    }

    /// The payload read as a client reads a BUNDLE: what splits packs back to the same bytes.
    private static func splitBundle(_ payload: [UInt8]) {
        guard let messages = try? DatagramBundle.split(payload) else { return }
        precondition(messages.allSatisfy { !$0.isEmpty }, "a bundle split into an empty message")
        let packed = DatagramBundle.pack(messages, limit: .max, spread: 1)
        precondition(packed.count == 1, "one bundle's messages did not pack into one datagram")
        precondition(messages.count == 1 ? packed[0].payload == messages[0] : packed[0].payload == payload,
                     "a bundle does not round-trip")
    }

    /// The payload read as a TYPING body (docs/PROTOCOL.md, section 2), as the server reads a
    /// client's and a client the server's, plain or sealed: what parses encodes back to it, and
    /// the sealed form keeps its MLS message whoever it names.
    private static func readTyping(_ payload: [UInt8]) {
        guard let body = SealedSignals.TypingBody(payload) else { return }
        precondition(UserName.isValid(body.user), "a typing body parsed to an invalid name")
        precondition(body.bytes == payload, "a typing body does not round-trip")
        if let sealed = body.sealed {
            precondition(sealed.starts(with: SealedText.privateMessagePrefix), "a sealed typing that is not a PrivateMessage")
            precondition(SealedSignals.TypingBody(body.naming("x").bytes)?.sealed == sealed, "renaming lost the MLS message")
        }
    }

    /// The payload read as a client reads an EARLY datagram: what decodes encodes back to it.
    private static func decodeEarly(_ payload: [UInt8]) {
        guard let early = try? EarlyPayload(decoding: payload) else { return }
        precondition(!early.message.isEmpty, "an early payload decoded to an empty message")
        if payload.count <= DatagramHeader.maxPayload {
            precondition(early.encoded() == payload, "an early payload does not round-trip")
        }
    }

    private static func parseSealed(_ payload: [UInt8], packet: UInt64) {
        let header = DatagramHeader(kind: .data, sessionID: 1, packetNumber: packet)
        guard let sealed = try? DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer) else {
            precondition(payload.count > DatagramHeader.maxPayload, "a payload within the limit did not seal")
            return
        }
        var buffer = sealed
        let decoded = try? Datagram.decodeHeader(&buffer)
        precondition(decoded == header, "the header did not survive sealing")
        let opened = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toServer)
        precondition(opened == payload, "a sealed payload did not open to itself")
        precondition((try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toClient)) == nil,
                     "a datagram opened in the wrong direction")
        splitBundle(payload)
        decodeEarly(payload)
        readTyping(payload)
        guard let message = try? Simp_Message(serializedBytes: payload) else { return }
        _ = MessageRules.problem(in: message)
        let reencoded: [UInt8]? = try? message.serializedBytes()
        let again: [UInt8]? = reencoded.flatMap { try? Simp_Message(serializedBytes: $0) }.flatMap { try? $0.serializedBytes() }
        precondition(again == reencoded, "a message does not round-trip")
    }

    /// The protobuf envelope as the control handler receives it: decoded, its body read,
    /// and encoded back for the reply path.
    static func envelopes(_ data: [UInt8]) {
        guard let envelope = try? Simp_Envelope(serializedBytes: data) else { return }
        checkRoundTrip(envelope)
        switch envelope.body {
        case .historyResult(let result):
            for message in result.messages { _ = MessageRules.problem(in: message) }
        case .error(let error):
            _ = error.code.name
        case .failed(let failed):
            _ = failed.code.name
        case .register(let request):
            _ = UserName.isValid(request.user)
        case .login(let request):
            _ = UserName.isValid(request.user)
        case .submitCommit(let request):
            checkConversation(request.conversation)
            checkCommitRequest(envelope.body)
        case .fetchCommits(let request):
            checkConversation(request.conversation)
            checkCommitRequest(envelope.body)
        default:
            break
        }
        _ = envelope.textFormatString()
    }

    /// A commit request's conversation (`CommitConversation`): what parses names itself back,
    /// and its Redis hash tag holds no brace (a brace would move its keys to another slot) and
    /// is the same from the other side of a one-to-one conversation.
    private static func checkConversation(_ name: String) {
        guard let conversation = CommitConversation(name, asker: "asker") else { return }
        precondition(CommitConversation(conversation.name, asker: "asker") == conversation, "a conversation does not name itself back")
        precondition(!conversation.tag.contains("{") && !conversation.tag.contains("}"), "a hash tag with a brace: \(conversation.tag)")
        if case .direct(let user, let peer) = conversation {
            precondition(CommitConversation(user, asker: peer)?.tag == conversation.tag, "the two sides' tags differ")
        }
    }

    /// A commit request as the server checks it (`CommitRequest.checking`): what it takes is
    /// within the bounds the server's arithmetic and scripts rely on (an epoch the server adds 1
    /// to, a Lua double counts exactly), and what it refuses is refused with a reason.
    private static func checkCommitRequest(_ body: Simp_Envelope.OneOf_Body?) {
        guard let body, let checked = CommitRequest.checking(body, asker: "asker") else {
            preconditionFailure("a commit request was not taken for one")
        }
        switch checked {
        case .failure(let refusal):
            precondition(!refusal.reason.isEmpty && refusal.code != .errorUnspecified, "a refusal without a code or reason")
        case .success(.submit(_, let epoch, let commit, let welcome, let groupInfo)):
            precondition(epoch < CommitRules.maxEpoch && epoch + 1 <= CommitRules.maxEpoch, "a submit's epoch past the bound: \(epoch)")
            precondition((1...CommitRules.maxCommitBytes).contains(commit.count), "a commit of \(commit.count) bytes taken")
            if let welcome {
                precondition((1...CommitRules.maxWelcomeBytes).contains(welcome.bytes.count), "a Welcome of \(welcome.bytes.count) bytes taken")
                precondition((1...CommitRules.maxAddedDevices).contains(welcome.added.count), "a Welcome for \(welcome.added.count) devices taken")
                precondition(Set(welcome.added).count == welcome.added.count, "one device added twice taken")
            }
            if let groupInfo {
                precondition((1...CommitRules.maxGroupInfoBytes).contains(groupInfo.count), "a GroupInfo of \(groupInfo.count) bytes taken")
            }
        case .success(.fetch(_, let from, let join, let external)):
            precondition(!(join && external), "a fetch for a Welcome and a GroupInfo taken")
            precondition(from <= CommitRules.maxEpoch, "a fetch's epoch past the bound: \(from)")
        }
    }

    static let signer = TokenSigner(secret: [UInt8](repeating: 9, count: 32))

    /// The login token parser (`UnverifiedToken`) on the bytes as a CONNECT's token string.
    /// What parses has valid names and spells back to a token that parses to the same; nothing
    /// random verifies under the key; and a token the signer issues for the parsed names
    /// verifies to them, while the same token with one byte of its body changed does not.
    static func tokens(_ data: [UInt8]) {
        let text = String(decoding: data, as: UTF8.self)
        guard let token = UnverifiedToken(text) else { return }
        precondition(UserName.isValid(token.user) && DeviceName.isValid(token.device), "a token parsed with an invalid name")
        precondition(token.mac.count == 32, "a token parsed with a MAC of \(token.mac.count) bytes")
        let spelled = "\(token.user)@\(token.device).\(token.expiresAt).\(token.nonce).\(Hex.string(token.mac))"
        let again = UnverifiedToken(spelled)
        precondition(again?.user == token.user && again?.device == token.device && again?.expiresAt == token.expiresAt
                     && again?.nonce == token.nonce && again?.mac == token.mac, "a token does not survive being spelled again")
        if token.verified(with: signer.key, nowMillis: .min) != nil {
            // Forging an HMAC-SHA256 by chance is a 2^-256 event: treat it as a broken check.
            preconditionFailure("random bytes verified as a token of \(token.user)")
        }
        checkIssued(user: token.user, device: token.device, expiresAt: token.expiresAt, nonce: token.nonce, flip: data.count)
    }

    /// A token issued for these names verifies to them until it expires, and not once any one
    /// byte of what its MAC signs (at `flip`, wrapped) is changed.
    private static func checkIssued(user: String, device: String, expiresAt: Int64, nonce: UInt64, flip: Int) {
        let issuedAt = expiresAt.subtractingReportingOverflow(signer.lifetimeMillis)
        guard !issuedAt.overflow else { return }
        let issued = signer.issue(user: user, device: device, nowMillis: issuedAt.partialValue, nonce: nonce)
        let verified = signer.verify(issued.token, nowMillis: issued.expiresAt - 1)
        precondition(verified?.user == user && verified?.device == device && verified?.expiresAt == issued.expiresAt,
                     "an issued token does not verify to its names")
        precondition(signer.verify(issued.token, nowMillis: issued.expiresAt) == nil, "a token verified at its expiry")
        var bytes = Array(issued.token.utf8)
        let macStart = bytes.count - 64
        let index = flip % (macStart - 1)
        bytes[index] = bytes[index] == UInt8(ascii: "1") ? UInt8(ascii: "2") : UInt8(ascii: "1")
        precondition(signer.verify(String(decoding: bytes, as: UTF8.self), nowMillis: issued.expiresAt - 1) == nil,
                     "a token verified with byte \(index) of its body changed")
    }
}
