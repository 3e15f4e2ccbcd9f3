import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Every check, by section of docs/PROTOCOL.md. The suite grows with the protocol.
    public static let all: [ConformanceCheck] = (framing + logout + names + limits + session + rebinding + sessions
        + datagrams + messages + conversations + receipts + conversationsII + keys + commits + sealed + stream + links).sorted { $0.rank.lexicographicallyPrecedes($1.rank) }

    static let framing: [ConformanceCheck] = [
        ConformanceCheck("1.1", "1. Control frames", "a frame of length 0 is MALFORMED_FRAME, then the connection closes") { target in
            let peer = try target.peer()
            peer.writeRaw([0, 0, 0, 0])
            let reply = try peer.read()
            try expect(errorCode(reply) == .malformedFrame, "got \(describe(reply))")
            try expect(try peer.read() == nil && peer.isClosedByServer(), "the connection stayed open")
        },
        ConformanceCheck("1.2", "1. Control frames", "before login a frame over 4096 bytes is FRAME_TOO_LARGE, then the connection closes") { target in
            let peer = try target.peer()
            peer.writeRaw([0, 0, 0x10, 0x01] + [UInt8](repeating: 0, count: 16))
            let reply = try peer.read()
            try expect(errorCode(reply) == .frameTooLarge, "got \(describe(reply))")
            try expect(try peer.read() == nil, "the connection stayed open")
        },
        ConformanceCheck("1.3", "1. Control frames", "an envelope without a body is BAD_REQUEST with its requestId; the connection stays") { target in
            let peer = try target.peer()
            peer.writeRaw(peer.frame(Simp_Envelope.with { $0.requestID = 7 }))
            let reply = try peer.response(to: 7)
            try expect(errorCode(reply) == .badRequest, "got \(describe(reply))")
            let pong = try peer.request(8, .ping(.with { $0.nonce = 1 }))
            try expect(pong != nil, "the connection closed after BAD_REQUEST")
        },
        ConformanceCheck("1.4", "1. Control frames", "ping is answered by pong with its nonce and requestId") { target in
            let peer = try target.peer()
            let reply = try peer.request(3, .ping(.with { $0.nonce = 0xfeed }))
            guard case .pong(let pong)? = reply?.body else { throw ConformanceFailure("got \(describe(reply))") }
            try expect(pong.nonce == 0xfeed, "pong carries nonce \(pong.nonce)")
        },
        ConformanceCheck("1.5", "1. Control frames", "register, then login gives a token; a wrong password is INVALID_CREDENTIALS") { target in
            let (user, password) = try target.account("a")
            let peer = try target.peer()
            let wrong = try peer.request(2, .login(.with { $0.user = user; $0.password = password + "x" }))
            try expect(errorCode(wrong) == .invalidCredentials, "a wrong password got \(describe(wrong))")
            let token = try peer.login(user, password)
            try expect(!token.isEmpty, "an empty token")
        },
        ConformanceCheck("1.6", "1. Control frames", "a request that needs a login, before it, is NOT_AUTHENTICATED") { target in
            let peer = try target.peer()
            let reply = try peer.request(4, .history(.with { $0.peer = "nobody"; $0.limit = 1 }))
            try expect(errorCode(reply) == .notAuthenticated, "got \(describe(reply))")
        },
    ]

    static let logout: [ConformanceCheck] = [
        ConformanceCheck("1.7", "1. Control frames", "after logout the connection is anonymous: a request that needs a login is NOT_AUTHENTICATED") { target in
            let (user, password) = try target.account("a")
            let peer = try target.peer()
            _ = try peer.login(user, password)
            let out = try peer.request(3, .logout(Simp_Logout()))
            guard case .ok? = out?.body else { throw ConformanceFailure("logout: \(describe(out))") }
            let reply = try peer.request(4, .devices(Simp_DevicesRequest()))
            try expect(errorCode(reply) == .notAuthenticated, "got \(describe(reply))")
        },
    ]

    static let names: [ConformanceCheck] = [
        ConformanceCheck("1.8", "1. Control frames, Names", "a user name with a dot, a dash and an underscore registers, logs in, connects and binds") { target in
            let (user, password) = try target.newUser("d.x-y_")
            let peer = try target.peer()
            let token = try peer.login(user, password)
            try peer.connectAndBind(token: token)
        },
    ]

    static let session: [ConformanceCheck] = [
        ConformanceCheck("3.1", "3. Session set-up", "connect gives a session id, a 16-byte bind token, a 32-byte key and a UDP port") { target in
            let (user, password) = try target.account("a")
            let peer = try target.peer()
            let token = try peer.login(user, password)
            let reply = try peer.request(2, .connect(.with { $0.token = token }))
            guard case .connected(let connected)? = reply?.body else { throw ConformanceFailure("got \(describe(reply))") }
            try expect(connected.sessionID != 0 && connected.bindToken.count == 16 && connected.sessionKey.count == 32
                       && connected.udpPort != 0, "got \(describe(reply))")
        },
        ConformanceCheck("3.2", "3. Session set-up", "BIND with the token: bound with requestId 0 on TCP, PONG on UDP") { target in
            let (peer, connected) = try target.connectedPeer("a")
            peer.sendDatagram(.bind, Array(connected.bindToken))
            var bound: Simp_Envelope?
            while let envelope = try peer.read() {
                if case .bound = envelope.body { bound = envelope; break }
            }
            try expect(bound?.requestID == 0, "bound: \(describe(bound))")
            let pong = try peer.receiveDatagram()
            try expect(pong?.header.kind == .pong, "no PONG datagram")
        },
        ConformanceCheck("3.3", "3. Session set-up", "BIND with a wrong token before the bind: INVALID_TOKEN") { target in
            let (peer, connected) = try target.connectedPeer("a")
            peer.sendDatagram(.bind, [UInt8](repeating: 0x5a, count: 16))
            var answer: Simp_Envelope?
            while let envelope = try peer.read() {
                if case .error = envelope.body { answer = envelope; break }
                if case .bound = envelope.body { answer = envelope; break }
            }
            try expect(errorCode(answer) == .invalidToken, "got \(describe(answer))")
        },
    ]

    static let rebinding: [ConformanceCheck] = [
        ConformanceCheck("3.4", "3. Session set-up", "a second connect on a connected connection is BAD_REQUEST") { target in
            let (user, password) = try target.account("a")
            let peer = try target.peer()
            let token = try peer.login(user, password)
            _ = try peer.request(2, .connect(.with { $0.token = token }))
            let again = try peer.request(3, .connect(.with { $0.token = token }))
            try expect(errorCode(again) == .badRequest, "got \(describe(again))")
        },
        ConformanceCheck("3.5", "3. Session set-up", "once bound, a BIND from the bound address is answered again: bound and PONG") { target in
            let (peer, _) = try target.boundPeer("a")
            _ = try peer.receiveDatagram()
            peer.sendDatagram(.bind, [UInt8](repeating: 0x33, count: 16))
            var bound: Simp_Envelope?
            while bound == nil, let envelope = try peer.read() {
                if case .bound = envelope.body { bound = envelope }
            }
            try expect(bound != nil, "no bound")
            // The PONG, past any other datagram the server sends meanwhile (it may: a path
            // check, a push), each read waiting as long as one datagram may take.
            var others: [DatagramKind] = []
            while let datagram = try peer.receiveDatagram() {
                if datagram.header.kind == .pong { return }
                others.append(datagram.header.kind)
            }
            throw ConformanceFailure("no PONG" + (others.isEmpty ? "" : " (only \(others))"))
        },
        ConformanceCheck("2.3", "2. Datagrams", "a datagram from a new address is challenged there, and the address is taken only after pathResponse") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            // A second socket of alice's session: a new source address.
            let moved = try target.peer()
            moved.session = alice.session
            moved.useServerUDPPort(Int(alice.session?.udpPort ?? 0))
            moved.skipPacketNumbers(to: 1_000)
            moved.sendDatagram(.data, try message(id: "n1", to: bob, order: 1))
            var challenge: [UInt8]?
            while challenge == nil, let datagram = try moved.receiveDatagram() {
                if datagram.header.kind == .challenge { challenge = datagram.payload }
            }
            guard let token = challenge, token.count == 16 else { throw ConformanceFailure("no 16-byte CHALLENGE at the new address") }
            alice.writeRaw(alice.frame(Simp_Envelope(requestID: 5, .pathResponse(.with { $0.token = Data(token) }))))
            var bound: Simp_Envelope?
            while bound == nil, let envelope = try alice.read() {
                if case .accepted(let accepted) = envelope.body, accepted.messageID == "n1" {
                    throw ConformanceFailure("the datagram from the unvalidated address was acted on")
                }
                if case .bound = envelope.body { bound = envelope }
            }
            try expect(bound?.requestID == 0, "bound after pathResponse: \(describe(bound))")
            moved.sendDatagram(.data, try message(id: "n1", to: bob, order: 1))
            let answers = try alice.answers(until: "n1")
            try expect(answers.last?.kind == "accepted", "from the new address after pathResponse: \(answers)")
        },
    ]

    static let datagrams: [ConformanceCheck] = [
        ConformanceCheck("2.1", "2. Datagrams", "a replayed DATA datagram is not acted on twice") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            alice.sendDatagram(.data, try message(id: "r1", to: bob, order: 1))
            alice.sendRaw(alice.lastSent)
            alice.sendDatagram(.data, try message(id: "r2", to: bob, order: 2))
            let answers = try alice.answers(until: "r2")
            try expect(answers.filter { $0.id == "r1" }.count == 1, "answers for the replayed message: \(answers)")
        },
        ConformanceCheck("2.2", "2. Datagrams", "a DATA datagram sealed under another key is not acted on") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            alice.sealKey = .init(size: .bits256)
            alice.sendDatagram(.data, try message(id: "f1", to: bob, order: 1))
            alice.sealKey = nil
            alice.sendDatagram(.data, try message(id: "f2", to: bob, order: 1))
            let answers = try alice.answers(until: "f2")
            try expect(!answers.contains { $0.id == "f1" }, "the forged datagram was answered: \(answers)")
        },
    ]

    static let messages: [ConformanceCheck] = [
        ConformanceCheck("4.1", "4. Messages", "a message is accepted with a seq, pushed with it, and delivered after the receipt") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            let content = sealedContent()
            alice.sendDatagram(.data, try message(id: "m1", to: bob, order: 1, content: content))
            let answers = try alice.answers(until: "m1")
            guard let accepted = answers.last, accepted.kind == "accepted", accepted.seq > 0 else {
                throw ConformanceFailure("no accepted with a seq: \(answers)")
            }
            // The account's inbox may hold earlier checks' messages: pushed first, in order.
            var found: Simp_Message?
            while found == nil, let push = try bobPeer.nextPush() {
                if push.messageID == "m1" { found = push }
            }
            guard let push = found else { throw ConformanceFailure("the message was not pushed to its recipient") }
            try expect(push.seq == accepted.seq && push.type == .sealed && push.content == content && push.messageID == "m1",
                       "pushed seq \(push.seq) id \(push.messageID), accepted seq \(accepted.seq)")
            bobPeer.writeRaw(bobPeer.frame(Simp_Envelope(requestID: 9, .receipt(.with { $0.upToSeq = push.seq }))))
            var delivered: Simp_Delivered?
            while delivered == nil, let envelope = try alice.read() {
                if case .delivered(let d) = envelope.body, d.messageID == "m1" { delivered = d }
            }
            try expect(delivered?.seq == accepted.seq, "delivered: \(String(describing: delivered))")
        },
        ConformanceCheck("4.2", "4. Messages", "a message ahead of a missing number gets missing{that number}") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            alice.sendDatagram(.data, try message(id: "o2", to: bob, order: 2))
            var missing: Simp_Missing?
            while missing == nil, let envelope = try alice.read() {
                if case .missing(let m) = envelope.body { missing = m }
            }
            try expect(missing?.clientSeqs == [1], "missing: \(String(describing: missing))")
            alice.sendDatagram(.data, try message(id: "o1", to: bob, order: 1))
            let answers = try alice.answers(until: "o2")
            let seqs = Dictionary(answers.map { ($0.id, $0.seq) }, uniquingKeysWith: { first, _ in first })
            try expect((seqs["o1"] ?? 0) > 0 && (seqs["o1"] ?? 0) < (seqs["o2"] ?? 0), "stored out of send order: \(answers)")
        },
        ConformanceCheck("4.3", "4. Messages", "withdraw of a number the server never received: failed WITHDRAWN") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            alice.sendDatagram(.data, try message(id: "w2", to: bob, order: 2))
            alice.writeRaw(alice.frame(Simp_Envelope(requestID: 5, .withdraw(.with { $0.messageID = "w1"; $0.clientSeq = 1; $0.toUser = bob }))))
            let answers = try alice.answers(until: "w2")
            try expect(answers.contains { $0.id == "w1" && $0.kind == "failed withdrawn" }, "answers: \(answers)")
        },
    ]

    static let conversations: [ConformanceCheck] = [
        ConformanceCheck("4.4", "4. Messages", "query: a reconnected sender learns its confirmed message was delivered") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            alice.sendDatagram(.data, try message(id: "q1", to: bob, order: 1))
            guard let accepted = try alice.answers(until: "q1").last, accepted.kind == "accepted" else { throw ConformanceFailure("not accepted") }
            var pushed: Simp_Message?
            while pushed == nil, let push = try bobPeer.nextPush() {
                if push.messageID == "q1" { pushed = push }
            }
            guard let push = pushed else { throw ConformanceFailure("not pushed") }
            bobPeer.writeRaw(bobPeer.frame(Simp_Envelope(requestID: 9, .receipt(.with { $0.upToSeq = push.seq }))))
            _ = try bobPeer.request(10, .ping(.with { $0.nonce = 1 }))
            let (again, _) = try target.boundPeer("a")
            again.writeRaw(again.frame(Simp_Envelope(requestID: 11, .query(.with {
                $0.messages = [.with { $0.messageID = "q1"; $0.toUser = bob; $0.seq = accepted.seq }]
            }))))
            var delivered: Simp_Delivered?
            while delivered == nil, let envelope = try again.read() {
                if case .delivered(let d) = envelope.body, d.messageID == "q1" { delivered = d }
            }
            try expect(delivered?.seq == accepted.seq, "no delivered for the query")
        },
        ConformanceCheck("4.5", "4. Messages, Devices", "every device of the recipient gets the message") { target in
            let (alice, _) = try target.boundPeer("a")
            let (phone, bob) = try target.boundPeer("b", device: "phone")
            let (laptop, _) = try target.boundPeer("b", device: "laptop")
            alice.sendDatagram(.data, try message(id: "d1", to: bob, order: 1))
            for (name, device) in [("phone", phone), ("laptop", laptop)] {
                var found = false
                while !found, let push = try device.nextPush() { found = push.messageID == "d1" }
                try expect(found, "bob's \(name) did not get the message")
            }
        },
        ConformanceCheck("4.6", "4. Messages, Groups", "a stranger's add is an invitation (GROUP_INVITED); once accepted, a group message reaches the member with its place in the group's order") { target in
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            let group = "g" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try alice.request(12, .groupRequest(.with { $0.action = .create; $0.group = group; $0.users = [bob] }))
            guard case .groupAnswer(let made)? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            try expect(made.invited == [bob] && !made.members.contains { $0.name == bob }, "bob invited, not added: \(made)")
            var invitation: Simp_Message?
            while invitation == nil, let push = try bobPeer.nextPush() { if push.type == .groupInvited { invitation = push } }
            try expect(invitation?.content == "#" + group && invitation?.fromUser == aliceName, "bob's GROUP_INVITED notice: \(String(describing: invitation))")
            let listed = try bobPeer.request(13, .groupRequest(.with { $0.action = .list }))
            guard case .groupAnswer(let list)? = listed?.body else { throw ConformanceFailure("list: \(describe(listed))") }
            try expect(list.invitations.map(\.group) == [group] && list.invitations.first?.by == aliceName, "bob's invitations: \(list.invitations)")
            let accepted = try bobPeer.request(14, .groupRequest(.with { $0.action = .accept; $0.group = group }))
            guard case .groupAnswer(let joined)? = accepted?.body, joined.members.contains(where: { $0.name == bob }) else {
                throw ConformanceFailure("accept: \(describe(accepted))")
            }
            alice.sendDatagram(.data, try message(id: "g1", to: "#" + group, order: 1))
            guard let accepted = try alice.answers(until: "g1").last, accepted.kind == "accepted" else { throw ConformanceFailure("not accepted") }
            var found: Simp_Message?
            while found == nil, let push = try bobPeer.nextPush() { if push.messageID == "g1" { found = push } }
            try expect(found?.groupSeq == accepted.seq && found?.toUser == "#" + group && found?.fromUser != bob,
                       "member got \(String(describing: found)), accepted place \(accepted.seq)")
        },
    ]

    /// A DATA payload: a message in send order, SEALED unless `type` says otherwise (a check whose
    /// subject is plaintext), so that a server takes it whether or not it requires end-to-end
    /// encryption. Its content by default a made-up sealed one (`sealedContent`).
    static func message(id: String, to user: String, order: UInt64, type: Simp_Message.MessageType = .sealed,
                        content: String = Conformance.sealedContent()) throws -> [UInt8] {
        try Simp_Message.with {
            $0.version = 1
            $0.messageID = id
            $0.toUser = user
            $0.type = type
            $0.content = content
            $0.clientSeq = order
        }.serializedBytes()
    }

    /// A SEALED message's content as the document has it: the standard base64 of an MLS
    /// PrivateMessage, here one with random ciphertext (`MLSFraming`): the server cannot tell.
    static func sealedContent(ciphertextBytes: Int = 80) -> String {
        Data(MLSFraming.privateMessage(ciphertextBytes: ciphertextBytes)).base64EncodedString()
    }
}

/// An answer to a sent message, as a check reads it.
struct Answer: CustomStringConvertible {
    var id: String
    var kind: String
    var seq: UInt64
    var description: String { "\(kind) \(id) seq \(seq)" }
}

extension RawPeer {
    /// The next message pushed to this session (DATA, or the first of a BUNDLE), past PONGs;
    /// nil after 5 s without one.
    func nextPush() throws -> Simp_Message? {
        while let datagram = try receiveDatagram() {
            switch datagram.header.kind {
            case .data: return try Simp_Message(serializedBytes: datagram.payload)
            case .bundle: return try DatagramBundle.split(datagram.payload).first.map { try Simp_Message(serializedBytes: $0) }
            default: continue
            }
        }
        return nil
    }

    /// Reads `accepted` and `failed` frames until one for `last` came.
    func answers(until last: String) throws -> [Answer] {
        var answers: [Answer] = []
        while let envelope = try read() {
            switch envelope.body {
            case .accepted(let accepted): answers.append(Answer(id: accepted.messageID, kind: "accepted", seq: accepted.seq))
            case .failed(let failed): answers.append(Answer(id: failed.messageID, kind: "failed \(failed.code.name)", seq: 0))
            default: continue
            }
            if answers.last?.id == last { return answers }
        }
        throw ConformanceFailure("no answer for \(last); got \(answers)")
    }
}
