import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Receipts with `missing`, history, group membership and a group's read receipt (section 1,
    /// History pages, and 4).
    static let receipts: [ConformanceCheck] = [
        ConformanceCheck("4.10", "4. Messages", "a receipt naming a seq as missing gets that message pushed again, and confirming it delivers it") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            alice.sendDatagram(.data, try message(id: "k1", to: bob, order: 1))
            guard let first = try bobPeer.push(of: "k1") else { throw ConformanceFailure("not pushed") }
            bobPeer.writeRaw(bobPeer.frame(Simp_Envelope(requestID: 5, .receipt(.with {
                $0.upToSeq = first.seq - 1
                $0.missing = [first.seq]
            }))))
            guard let again = try bobPeer.push(of: "k1") else { throw ConformanceFailure("not pushed again after the receipt named it missing") }
            try expect(again.seq == first.seq && again.content == first.content, "pushed again as \(again)")
            bobPeer.writeRaw(bobPeer.frame(Simp_Envelope(requestID: 6, .receipt(.with { $0.upToSeq = first.seq }))))
            var delivered: Simp_Delivered?
            while delivered == nil, let envelope = try alice.read() {
                if case .delivered(let d) = envelope.body, d.messageID == "k1" { delivered = d }
            }
            try expect(delivered?.seq == first.seq, "no delivered after the receipt")
        },
        ConformanceCheck("4.11", "1. Control frames, History pages", "history of a conversation holds the accepted messages, oldest first in a page") { target in
            let (alice, _) = try target.boundPeer("a")
            let (_, bob) = try target.boundPeer("b")
            let (first, second) = (sealedContent(), sealedContent())
            alice.sendDatagram(.data, try message(id: "h1", to: bob, order: 1, content: first))
            alice.sendDatagram(.data, try message(id: "h2", to: bob, order: 2, content: second))
            _ = try alice.answers(until: "h2")
            let reply = try alice.request(7, .history(.with { $0.peer = bob; $0.limit = 2 }))
            guard case .historyResult(let page)? = reply?.body else { throw ConformanceFailure("got \(describe(reply))") }
            try expect(page.messages.map(\.messageID) == ["h1", "h2"] && page.messages.map(\.content) == [first, second],
                       "history: \(page.messages.map(\.messageID))")
        },
        ConformanceCheck("4.12", "4. Messages, Groups", "to a group one is not a member of: failed NOT_A_MEMBER; its members: NOT_A_MEMBER; its name taken: GROUP_EXISTS") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, _) = try target.boundPeer("b")
            let group = "g" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try alice.request(12, .groupRequest(.with { $0.action = .create; $0.group = group }))
            guard case .groupAnswer? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            bobPeer.sendDatagram(.data, try message(id: "n1", to: "#" + group, order: 1))
            let answers = try bobPeer.answers(until: "n1")
            try expect(answers.last?.kind == "failed not_a_member", "a non-member's message: \(answers)")
            let members = try bobPeer.request(13, .groupRequest(.with { $0.action = .members; $0.group = group }))
            try expect(errorCode(members) == .notAMember, "a non-member's MEMBERS: \(describe(members))")
            let taken = try bobPeer.request(14, .groupRequest(.with { $0.action = .create; $0.group = group }))
            try expect(errorCode(taken) == .groupExists, "CREATE of a taken name: \(describe(taken))")
        },
        ConformanceCheck("4.30", "4. Messages, Groups", "an add by a user one blocked is answered as an invitation, and none reaches the blocker: ACCEPT is NOT_INVITED") { target in
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            let blocked = try bobPeer.request(20, .contactRequest(.with { $0.action = .block; $0.user = aliceName }))
            guard case .contactAnswer? = blocked?.body else { throw ConformanceFailure("block: \(describe(blocked))") }
            let group = "g" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try alice.request(21, .groupRequest(.with { $0.action = .create; $0.group = group; $0.users = [bob] }))
            guard case .groupAnswer(let made)? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            try expect(made.invited == [bob], "answered as invited, so the block is not told: \(made)")
            let listed = try bobPeer.request(22, .groupRequest(.with { $0.action = .list }))
            guard case .groupAnswer(let list)? = listed?.body else { throw ConformanceFailure("list: \(describe(listed))") }
            try expect(list.invitations.isEmpty, "the blocker's invitations: \(list.invitations)")
            let accepted = try bobPeer.request(23, .groupRequest(.with { $0.action = .accept; $0.group = group }))
            try expect(errorCode(accepted) == .notInvited, "ACCEPT with no invitation: \(describe(accepted))")
        },
        ConformanceCheck("4.19", "4. Messages, Read receipts",
                         "a member's receipt and read mark of a group message (its group and place named) reach its sender as a READ push naming the group; under --e2e required the mark is E2E_REQUIRED and nothing is told") { target in
            let endToEnd = try target.endToEnd()
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            // A block of alice's (4.30 leaves one) undone, so that the check stands alone: an
            // error when there is none is no matter.
            _ = try bobPeer.request(39, .contactRequest(.with { $0.action = .unblock; $0.user = aliceName }))
            let group = "g" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            let created = try alice.request(40, .groupRequest(.with { $0.action = .create; $0.group = group; $0.users = [bob] }))
            guard case .groupAnswer(let made)? = created?.body else { throw ConformanceFailure("create: \(describe(created))") }
            if !made.members.contains(where: { $0.name == bob }) {
                let accepted = try bobPeer.request(41, .groupRequest(.with { $0.action = .accept; $0.group = group }))
                guard case .groupAnswer? = accepted?.body else { throw ConformanceFailure("accept: \(describe(accepted))") }
            }
            alice.sendDatagram(.data, try message(id: "gr1", to: "#" + group, order: 1))
            guard try alice.answers(until: "gr1").last?.kind == "accepted" else { throw ConformanceFailure("not accepted") }
            guard let pushed = try bobPeer.push(of: "gr1") else { throw ConformanceFailure("not pushed to the member") }
            let mark = Simp_Envelope(requestID: 43, .markRead(.with {
                $0.reads = [.with {
                    $0.fromUser = pushed.fromUser
                    $0.messageID = "gr1"
                    $0.seq = pushed.seq
                    $0.group = group
                    $0.groupSeq = pushed.groupSeq
                }]
            }))
            // One write, the receipt first: the mark sees it.
            bobPeer.writeRaw(bobPeer.frame(Simp_Envelope(requestID: 42, .receipt(.with { $0.upToSeq = pushed.seq }))) + bobPeer.frame(mark))
            try expectMarkAnswer(try bobPeer.response(to: 43), endToEnd)
            if endToEnd == .required { return try expectNoRead(to: alice, from: bobPeer, address: "#" + group, after: "gr2") }
            guard let read = try alice.push(of: { $0.type == .read }) else { throw ConformanceFailure("no READ pushed to the sender") }
            try expect(read.fromUser == bob && read.toUser == "#" + group && read.content == "gr1", "READ: \(read)")
        },
    ]
}

extension RawPeer {
    /// The next push of this message id, past others; nil after 5 s without one.
    func push(of id: String) throws -> Simp_Message? {
        while let push = try nextPush() {
            if push.messageID == id { return push }
        }
        return nil
    }

    /// The messages pushed to this session up to the one of `id` (it included).
    func pushes(until id: String) throws -> [Simp_Message] {
        var pushed: [Simp_Message] = []
        while let push = try nextPush() {
            pushed.append(push)
            if push.messageID == id { return pushed }
        }
        throw ConformanceFailure("\(id) was not pushed; before it: \(pushed.map(\.messageID))")
    }
}
