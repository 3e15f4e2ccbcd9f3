import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Sealed messages (section 4, Sealed messages): the server stores and pushes what it cannot
    /// read unchanged, and checks only the form.
    static let sealed: [ConformanceCheck] = [
        ConformanceCheck("4.21", "4. Messages, Sealed messages",
                         "a SEALED message (base64 of an MLS PrivateMessage) is pushed with its content unchanged; one whose content is not that is BAD_REQUEST") { target in
            let (alice, _) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            let content = sealedContent(ciphertextBytes: 120)
            alice.sendDatagram(.data, try message(id: "s1", to: bob, order: 1, content: content))
            guard let pushed = try bobPeer.push(of: "s1") else { throw ConformanceFailure("a SEALED message was not pushed") }
            try expect(pushed.type == .sealed && pushed.content == content, "pushed as \(pushed)")
            alice.sendDatagram(.data, try message(id: "s2", to: bob, order: 2, content: "not base64 of an MLS message"))
            let answers = try alice.answers(until: "s2")
            try expect(answers.last?.kind == "failed bad_request", "a SEALED message with a plaintext content: \(answers)")
        },
        ConformanceCheck("4.25", "4. Messages, Read receipts",
                         "a SEALED_READ to a user is pushed with its content unchanged; one to a group, or with a plaintext content, is BAD_REQUEST; to a user with read receipts off it is NOT_A_CONTACT") { target in
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            try strangers(alice, aliceName, bobPeer, bob)
            let content = sealedContent(ciphertextBytes: 60)
            alice.sendDatagram(.data, try message(id: "sr1", to: bob, order: 1, type: .sealedRead, content: content))
            guard let pushed = try bobPeer.push(of: "sr1") else { throw ConformanceFailure("a SEALED_READ was not pushed") }
            try expect(pushed.type == .sealedRead && pushed.content == content && pushed.fromUser == aliceName, "pushed as \(pushed)")
            alice.sendDatagram(.data, try message(id: "sr2", to: "#nosuchgroup", order: 2, type: .sealedRead, content: content))
            alice.sendDatagram(.data, try message(id: "sr3", to: bob, order: 3, type: .sealedRead, content: "r1 r2"))
            let refused = try alice.answers(until: "sr3")
            try expect(refused.filter { $0.id != "sr1" }.map(\.kind) == ["failed bad_request", "failed bad_request"], "answers: \(refused)")
            _ = try bobPeer.request(92, .settingsRequest(.with { $0.set = [.with { $0.name = "read-receipts"; $0.value = "off" }] }))
            defer { _ = try? bobPeer.request(93, .settingsRequest(.with { $0.set = [.with { $0.name = "read-receipts"; $0.value = "on" }] })) }
            alice.sendDatagram(.data, try message(id: "sr4", to: bob, order: 4, type: .sealedRead, content: content))
            let off = try alice.answers(until: "sr4")
            try expect(off.last?.kind == "failed not_a_contact", "a SEALED_READ to a user with read receipts off: \(off)")
        },
        ConformanceCheck("4.27", "4. Messages, Read receipts",
                         "a SEALED_READ to SENDER#GROUP is stored for SENDER alone, pushed with its toUser and content unchanged, even when SENDER takes messages from contacts only, if SENDER is a member of GROUP; to a user who is not, it is NOT_A_CONTACT; from a reader who is not a member, it is NOT_A_MEMBER") { target in
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            let (carolPeer, carol) = try target.boundPeer("c")
            try strangers(alice, aliceName, bobPeer, bob)
            let group = "r" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
            _ = try alice.request(20, .groupRequest(.with { $0.action = .create; $0.group = group; $0.users = [bob] }))
            _ = try bobPeer.request(21, .groupRequest(.with { $0.action = .accept; $0.group = group }))
            // bob's copy of his own addition: the group's copies to him have reached it.
            guard try bobPeer.push(of: { $0.type == .groupAdded && $0.content == bob }) != nil else {
                throw ConformanceFailure("bob was not told he joined \(group)")
            }
            _ = try bobPeer.request(22, .settingsRequest(.with { $0.set = [.with { $0.name = "contacts-only"; $0.value = "on" }] }))
            defer { _ = try? bobPeer.request(23, .settingsRequest(.with { $0.set = [.with { $0.name = "contacts-only"; $0.value = "off" }] })) }
            let content = sealedContent(ciphertextBytes: 60)
            let address = bob + "#" + group
            alice.sendDatagram(.data, try message(id: "gr1", to: address, order: 1, type: .sealedRead, content: content))
            guard let pushed = try bobPeer.push(of: "gr1") else { throw ConformanceFailure("a group's SEALED_READ was not pushed") }
            try expect(pushed.type == .sealedRead && pushed.content == content && pushed.toUser == address && pushed.fromUser == aliceName,
                       "pushed as \(pushed)")
            alice.sendDatagram(.data, try message(id: "gr2", to: carol + "#" + group, order: 2, type: .sealedRead, content: content))
            let answers = try alice.answers(until: "gr2")
            try expect(answers.last?.kind == "failed not_a_contact", "a group's SEALED_READ to a user not in the group: \(answers)")
            carolPeer.sendDatagram(.data, try message(id: "gr3", to: address, order: 1, type: .sealedRead, content: content))
            let stranger = try carolPeer.answers(until: "gr3")
            try expect(stranger.last?.kind == "failed not_a_member", "a group's SEALED_READ from a reader not in the group: \(stranger)")
        },
        ConformanceCheck("2.8", "2. Datagrams, TYPING",
                         "a sealed TYPING (a user name, a zero byte, an MLS PrivateMessage) reaches that user naming the typer, the MLS message unchanged") { target in
            let (x, xName) = try target.boundPeer("c")
            let (y, yName) = try target.boundPeer("d")
            try strangers(x, xName, y, yName)
            let sealed = SealedSignals.TypingBody(user: yName, sealed: MLSFraming.privateMessage(ciphertextBytes: 40))
            x.sendDatagram(.typing, sealed.bytes)
            guard let typing = try y.datagram(of: .typing) else { throw ConformanceFailure("no TYPING datagram") }
            try expect(typing == sealed.naming(xName).bytes, "TYPING was \(typing)")
        },
        ConformanceCheck("4.29", "4. Messages, Sealed messages",
                         "a plaintext message under --e2e required is failed E2E_REQUIRED, and nothing is stored or pushed (a sealed one after it is); under --e2e optional it is accepted and pushed unchanged") { target in
            let endToEnd = try target.endToEnd()
            let (alice, aliceName) = try target.boundPeer("a")
            let (bobPeer, bob) = try target.boundPeer("b")
            try strangers(alice, aliceName, bobPeer, bob)
            alice.sendDatagram(.data, try message(id: "p1", to: bob, order: 1, type: .text, content: "plaintext"))
            // The sealed one after it: what was stored before it is pushed before it.
            alice.sendDatagram(.data, try message(id: "p2", to: bob, order: 2))
            let answers = try alice.answers(until: "p2").map(\.kind)
            let plaintext = try bobPeer.pushes(until: "p2").filter { $0.messageID == "p1" }
            switch endToEnd {
            case .required:
                try expect(answers == ["failed e2e_required", "accepted"], "answers: \(answers)")
                try expect(plaintext.isEmpty, "the refused plaintext message was pushed: \(plaintext)")
                let reply = try alice.request(60, .history(.with { $0.peer = bob; $0.limit = 5 }))
                guard case .historyResult(let page)? = reply?.body else { throw ConformanceFailure("history: \(describe(reply))") }
                try expect(!page.messages.contains { $0.messageID == "p1" } && page.messages.last?.messageID == "p2",
                           "the conversation's history: \(page.messages.map(\.messageID))")
            case .optional:
                try expect(answers == ["accepted", "accepted"], "answers: \(answers)")
                try expect(plaintext.count == 1 && plaintext.first?.type == .text && plaintext.first?.content == "plaintext",
                           "pushed as \(plaintext)")
            }
        },
    ]
}
