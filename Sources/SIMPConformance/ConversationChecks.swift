import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Contacts and blocking, read receipts, typing and presence (section 4 and 2), between the
    /// run's accounts "c" and "d" (registrations are limited per address), each check starting
    /// from no contact, no block and contacts-only off (`strangers`).
    static let conversationsII: [ConformanceCheck] = [
        ConformanceCheck("4.13", "4. Messages, Contacts and blocking",
                         "contacts-only refuses a stranger (NOT_A_CONTACT); a request is a CONTACT_REQUEST push; once accepted messages flow; a block refuses again") { target in
            let (x, xName) = try target.boundPeer("c")
            let (y, yName) = try target.boundPeer("d")
            try strangers(x, xName, y, yName)
            let set = try y.request(20, .settingsRequest(.with { $0.set = [.with { $0.name = "contacts-only"; $0.value = "on" }] }))
            guard case .settingsAnswer? = set?.body else { throw ConformanceFailure("settings: \(describe(set))") }
            x.sendDatagram(.data, try message(id: "s1", to: yName, order: 1))
            try expect(try x.answers(until: "s1").last?.kind == "failed not_a_contact", "a stranger's message was not refused")
            let asked = try x.request(21, .contactRequest(.with { $0.action = .add; $0.user = yName }))
            guard case .contactAnswer(let records)? = asked?.body else { throw ConformanceFailure("add: \(describe(asked))") }
            try expect(records.contacts.map(\.state) == ["sent"], "the asker's record: \(records.contacts)")
            guard let request = try y.push(of: { $0.type == .contactRequest }) else { throw ConformanceFailure("no CONTACT_REQUEST pushed") }
            try expect(request.fromUser == xName, "the request's sender: \(request.fromUser)")
            let accepted = try y.request(22, .contactRequest(.with { $0.action = .accept; $0.user = xName }))
            guard case .contactAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            guard try x.push(of: { $0.type == .contactAccepted && $0.fromUser == yName }) != nil else {
                throw ConformanceFailure("no CONTACT_ACCEPTED pushed")
            }
            x.sendDatagram(.data, try message(id: "s2", to: yName, order: 2))
            try expect(try x.answers(until: "s2").last?.kind == "accepted", "a contact's message was not accepted")
            _ = try y.request(23, .contactRequest(.with { $0.action = .block; $0.user = xName }))
            x.sendDatagram(.data, try message(id: "s3", to: yName, order: 3))
            try expect(try x.answers(until: "s3").last?.kind == "failed not_a_contact", "a blocked sender's message was not refused")
        },
        ConformanceCheck("4.14", "4. Messages, Read receipts",
                         "a receipt and a read mark of the message, written together (receipt first), reach its sender as a READ push naming it; under --e2e required the mark is E2E_REQUIRED and nothing is told") { target in
            let endToEnd = try target.endToEnd()
            let (x, xName) = try target.boundPeer("c")
            let (y, yName) = try target.boundPeer("d")
            try strangers(x, xName, y, yName)
            x.sendDatagram(.data, try message(id: "r1", to: yName, order: 1))
            guard let pushed = try y.push(of: "r1") else { throw ConformanceFailure("not pushed") }
            // One write: the server takes a connection's frames in order, so the mark sees the receipt.
            let mark = Simp_Envelope(requestID: 31, .markRead(.with { $0.reads = [.with { $0.fromUser = pushed.fromUser; $0.messageID = "r1"; $0.seq = pushed.seq }] }))
            y.writeRaw(y.frame(Simp_Envelope(requestID: 30, .receipt(.with { $0.upToSeq = pushed.seq }))) + y.frame(mark))
            try expectMarkAnswer(try y.response(to: 31), endToEnd)
            if endToEnd == .required { return try expectNoRead(to: x, from: y, address: xName, after: "r2") }
            guard let read = try x.push(of: { $0.type == .read }) else { throw ConformanceFailure("no READ pushed") }
            try expect(read.fromUser == yName && read.content == "r1", "READ: \(read)")
        },
        ConformanceCheck("4.20", "4. Messages, Receipts",
                         "a receipt that holds what it received (`receivedUpToSeq` above `upToSeq`) confirms nothing more: a read mark of a held message is left out, one of a confirmed message is told; under --e2e required the mark is E2E_REQUIRED, nothing is told, and the held message is pushed again on the reader's next session") { target in
            let endToEnd = try target.endToEnd()
            // Accounts of their own: another check's READ left in an inbox would come first.
            let (x, xName) = try target.boundPeer("s")
            let (y, yName) = try target.boundPeer("t")
            try strangers(x, xName, y, yName)
            x.sendDatagram(.data, try message(id: "h1", to: yName, order: 1))
            x.sendDatagram(.data, try message(id: "h2", to: yName, order: 2))
            guard let first = try y.push(of: "h1"), let second = try y.push(of: "h2") else { throw ConformanceFailure("not pushed") }
            func mark(_ pushed: Simp_Message, _ id: String) -> Simp_Envelope.OneOf_Body {
                .markRead(.with { $0.reads = [.with { $0.fromUser = pushed.fromUser; $0.messageID = id; $0.seq = pushed.seq }] })
            }
            // Both arrived, neither is confirmed: the mark of h1 must be left out.
            let held = Simp_Envelope(requestID: 40, .receipt(.with { $0.upToSeq = first.seq - 1; $0.receivedUpToSeq = second.seq }))
            y.writeRaw(y.frame(held) + y.frame(Simp_Envelope(requestID: 41, mark(first, "h1"))))
            try expectMarkAnswer(try y.response(to: 41), endToEnd)
            if endToEnd == .required {
                // No mark is told here, so the receipt is checked on its own (it does not depend
                // on the mode): what it held, unconfirmed, is pushed again on y's next session.
                y.closeControl()
                let (again, _) = try target.boundPeer("t")
                guard try again.push(of: "h1") != nil else {
                    throw ConformanceFailure("h1 was not pushed again on the next session: the held receipt was taken as confirming it")
                }
                // Both confirmed now, so that no later check finds them pushed again.
                again.writeRaw(again.frame(Simp_Envelope(requestID: 44, .receipt(.with { $0.upToSeq = second.seq }))))
                return try expectNoRead(to: x, from: again, address: xName, after: "h3")
            }
            // Now both are confirmed, and h2 is marked: its READ is the first x gets.
            let confirmed = Simp_Envelope(requestID: 42, .receipt(.with { $0.upToSeq = second.seq }))
            y.writeRaw(y.frame(confirmed) + y.frame(Simp_Envelope(requestID: 43, mark(second, "h2"))))
            try expectMarkAnswer(try y.response(to: 43), endToEnd)
            guard let read = try x.push(of: { $0.type == .read }) else { throw ConformanceFailure("no READ pushed") }
            try expect(read.content == "h2", "the first READ names \(read.content): a held receipt was taken as confirming h1")
        },
        ConformanceCheck("2.5", "2. Datagrams, Typing and presence",
                         "a TYPING datagram naming a user reaches that user as a TYPING datagram naming the typer; under --e2e required it is dropped, and a sealed one after it reaches the user") { target in
            let endToEnd = try target.endToEnd()
            let (x, xName) = try target.boundPeer("c")
            let (y, yName) = try target.boundPeer("d")
            try strangers(x, xName, y, yName)
            x.sendDatagram(.typing, SealedSignals.TypingBody(user: yName).bytes)
            // Under --e2e required a sealed one follows: had the plain one been relayed, it came first.
            let sealed = SealedSignals.TypingBody(user: yName, sealed: MLSFraming.privateMessage(ciphertextBytes: 40))
            if endToEnd == .required { x.sendDatagram(.typing, sealed.bytes) }
            guard let typing = try y.datagram(of: .typing) else { throw ConformanceFailure("no TYPING datagram") }
            let expected = endToEnd == .required ? sealed.naming(xName) : SealedSignals.TypingBody(user: xName)
            try expect(typing == expected.bytes, "under --e2e \(endToEnd) the first TYPING was \(SealedSignals.TypingBody(typing).map { "\($0)" } ?? "\(typing)")")
        },
        ConformanceCheck("2.6", "2. Datagrams, Typing and presence", "a contact whose last session ends is told as a PRESENCE datagram: USER offline MS") { target in
            let (x, xName) = try target.boundPeer("c")
            let (y, yName) = try target.boundPeer("d")
            try strangers(x, xName, y, yName)
            _ = try x.request(40, .contactRequest(.with { $0.action = .add; $0.user = yName }))
            let accepted = try y.request(41, .contactRequest(.with { $0.action = .accept; $0.user = xName }))
            guard case .contactAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            y.closeControl()
            // y's own "online" may come first: its presence is written just after its bind.
            var presence: [UInt8]?
            while presence == nil, let next = try x.datagram(of: .presence) {
                if !String(decoding: next, as: UTF8.self).hasPrefix(yName + " online ") { presence = next }
            }
            guard let presence else { throw ConformanceFailure("no PRESENCE datagram saying offline") }
            let words = String(decoding: presence, as: UTF8.self).split(separator: " ")
            try expect(words.count == 3 && words[0] == yName && words[1] == "offline" && (Int64(words[2]) ?? 0) > 0,
                       "PRESENCE says \(String(decoding: presence, as: UTF8.self))")
        },
    ]

    /// A `markRead`'s answer in the server's mode: `ok`, or under `--e2e required`
    /// `E2E_REQUIRED` (reads go sealed there: Read receipts).
    static func expectMarkAnswer(_ answer: Simp_Envelope?, _ endToEnd: ConformanceTarget.EndToEnd) throws {
        switch endToEnd {
        case .optional:
            guard case .ok? = answer?.body else { throw ConformanceFailure("markRead: \(describe(answer))") }
        case .required:
            try expect(errorCode(answer) == .e2ERequired, "markRead under --e2e required: \(describe(answer))")
        }
    }

    /// A mark refused `E2E_REQUIRED` tells nothing: the sender's pushes up to a sealed message
    /// the reader sends after the refusal (its first in this session, to `address`: the sender,
    /// or their group) hold no READ, as one stored for the mark would come before it.
    static func expectNoRead(to sender: RawPeer, from reader: RawPeer, address: String, after id: String) throws {
        reader.sendDatagram(.data, try message(id: id, to: address, order: 1))
        let reads = try sender.pushes(until: id).filter { $0.type == .read }
        try expect(reads.isEmpty, "a READ was told of a mark refused E2E_REQUIRED: \(reads)")
    }

    /// Undoes what an earlier check (or run) left between x and y: contacts-only off, last-seen
    /// on, no block, no contact or request. Refusals (nothing to undo) are expected.
    static func strangers(_ x: RawPeer, _ xName: String, _ y: RawPeer, _ yName: String) throws {
        _ = try y.request(90, .settingsRequest(.with {
            $0.set = [.with { $0.name = "contacts-only"; $0.value = "off" }, .with { $0.name = "last-seen"; $0.value = "on" }]
        }))
        _ = try y.request(91, .contactRequest(.with { $0.action = .unblock; $0.user = xName }))
        _ = try x.request(92, .contactRequest(.with { $0.action = .unblock; $0.user = yName }))
        _ = try x.request(93, .contactRequest(.with { $0.action = .remove; $0.user = yName }))
    }
}

extension RawPeer {
    /// The next push matching `match`, past others; nil after 5 s without one.
    func push(of match: (Simp_Message) -> Bool) throws -> Simp_Message? {
        while let push = try nextPush() {
            if match(push) { return push }
        }
        return nil
    }

    /// The payload of the next datagram of `kind`, past others; nil after 5 s without one.
    func datagram(of kind: DatagramKind) throws -> [UInt8]? {
        while let datagram = try receiveDatagram() {
            if datagram.header.kind == kind { return datagram.payload }
        }
        return nil
    }
}
