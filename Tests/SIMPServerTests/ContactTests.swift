import Foundation
import SIMPClient
import SIMPCore
import Testing

extension EventLog {
    var contactRequests: [String] {
        all.compactMap { if case .contactRequest(let from) = $0 { from } else { nil } }
    }

    var contactAcceptances: [String] {
        all.compactMap { if case .contactAccepted(let by) = $0 { by } else { nil } }
    }
}

/// Contacts and blocking (docs/PROTOCOL.md, Contacts and blocking), against a real server and
/// Redis: what a stranger's or a blocked sender's message comes to, what is (not) stored for
/// the recipient, and how requests, acceptance and unblocking restore the flow.
@Suite(.serialized) struct ContactTests {
    /// bob's device that takes EARLY datagrams: nothing refused may reach it even before its store answers.
    func earlyDevice(_ cluster: TestCluster, _ user: String) async throws -> (SIMPClient, EventLog) {
        var config = cluster.clientConfiguration()
        config.earlyDelivery = true
        let client = SIMPClient(configuration: config)
        let log = EventLog(client)
        try await client.connect(user: user, password: "pw-\(user)")
        return (client, log)
    }

    /// What Redis holds for `user`: the seq numbering's top (0: nothing was ever stored) and the inbox's size.
    func stored(_ cluster: TestCluster, for user: String) throws -> (top: Int, inbox: Int) {
        (try number(cluster, ["GET", "simp:{\(user)}:seq"]), try number(cluster, ["ZCARD", "simp:{\(user)}:inbox"]))
    }

    /// A RESP integer or bulk-string reply as a number; a nil reply is 0.
    func number(_ cluster: TestCluster, _ command: [String]) throws -> Int {
        let lines = try cluster.redis.command(command).split(separator: "\r\n").map(String.init)
        switch lines.first?.first {
        case ":": return Int(lines[0].dropFirst()) ?? -1
        case "$": return lines[0] == "$-1" ? 0 : Int(lines.count > 1 ? lines[1] : "") ?? -1
        default: return -1
        }
    }

    @Test func aStrangersMessageFailsUntilTheRequestIsAccepted() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        #expect(try await bob.set(.contactsOnly(true)).contactsOnly == true)

        let refused = try await alice.send(to: "bob", text: "hello stranger")
        #expect(await aliceLog.wait { $0.failed.contains { $0.id == refused && $0.reason == "bob does not take messages from you" } })
        #expect(try stored(cluster, for: "bob") == (top: 0, inbox: 0), "nothing stored for bob")
        #expect(try number(cluster, ["EXISTS", "simp:{bob}:hist:alice"]) == 0, "nor in bob's history")

        let asked = try await alice.addContact("bob")
        #expect(asked.state(of: "bob") == .sent)
        #expect(await bobLog.wait { $0.contactRequests == ["alice"] })
        #expect(try await bob.contacts().state(of: "alice") == .received)
        // A request is not a contact: still refused.
        let early = try await alice.send(to: "bob", text: "before the answer")
        #expect(await aliceLog.wait { $0.failed.contains { $0.id == early } })

        let accepted = try await bob.acceptContact("alice")
        #expect(accepted.state(of: "alice") == .contact)
        #expect(await aliceLog.wait { $0.contactAcceptances == ["bob"] })
        #expect(try await alice.contacts().state(of: "bob") == .contact)

        let flows = try await alice.send(to: "bob", text: "hello contact")
        #expect(await bobLog.wait { $0.messages.map(\.text) == ["hello contact"] })
        #expect(await aliceLog.wait { $0.delivered.contains(flows) })
        #expect(!bobLog.messages.contains { $0.id == refused || $0.id == early })

        // Ended on both sides: refused again.
        let removed = try await alice.removeContact("bob")
        #expect(removed.contacts.isEmpty)
        #expect(try await bob.contacts().contacts.isEmpty)
        let after = try await alice.send(to: "bob", text: "after removal")
        #expect(await aliceLog.wait { $0.failed.contains { $0.id == after } })
        // Off again: anyone's messages are stored.
        try await bob.set(.contactsOnly(false))
        let open = try await alice.send(to: "bob", text: "open again")
        #expect(await bobLog.wait { $0.messages.map(\.id).contains(open) })
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func aBlockedSendersMessagesNeverReachTheRecipient() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await earlyDevice(cluster, "bob")
        let before = try await alice.send(to: "bob", text: "before the block")
        #expect(await aliceLog.wait { $0.delivered.contains(before) })
        let top = try stored(cluster, for: "bob").top
        #expect(top == 1)

        let blocked = try await bob.block("alice")
        #expect(blocked.blocked == ["alice"])
        var refused: [String] = []
        for index in 0..<20 { refused.append(try await alice.send(to: "bob", text: "blocked \(index)")) }
        #expect(await aliceLog.wait { log in Set(refused).isSubset(of: log.failed.map(\.id)) })
        #expect(aliceLog.failed.allSatisfy { $0.reason == "bob does not take messages from you" }, "told as a stranger would be")
        // A contact request from a blocked user is dropped unseen; the asker sees it pending.
        #expect(try await alice.addContact("bob").state(of: "bob") == .sent)
        #expect(try await bob.contacts().contacts.isEmpty)
        #expect(try stored(cluster, for: "bob").top == top, "nothing numbered for bob: no message, no request")

        let unblocked = try await bob.unblock("alice")
        #expect(unblocked.blocked.isEmpty)
        let after = try await alice.send(to: "bob", text: "after the unblock")
        #expect(await aliceLog.wait { $0.delivered.contains(after) })
        // Numbered right after the message before the block: nothing was stored in between.
        #expect(try stored(cluster, for: "bob").top == top + 1)
        #expect(bobLog.messages.map(\.id) == [before, after])
        #expect(!bobLog.messages.contains { refused.contains($0.id) }, "not even early")
        #expect(bobLog.contactRequests.isEmpty)
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func askingBackAcceptsAndDecliningForgetsBothSides() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let (carol, _) = try await cluster.connectedClient("carol")

        try await alice.addContact("bob")
        #expect(await bobLog.wait { $0.contactRequests == ["alice"] })
        // bob asks alice back: that accepts her request.
        #expect(try await bob.addContact("alice").state(of: "alice") == .contact)
        #expect(await aliceLog.wait { $0.contactAcceptances == ["bob"] })
        #expect(try await alice.contacts().state(of: "bob") == .contact)

        try await carol.addContact("alice")
        #expect(await aliceLog.wait { $0.contactRequests == ["carol"] })
        #expect(try await alice.declineContact("carol").state(of: "carol") == nil)
        #expect(try await carol.contacts().state(of: "alice") == nil, "carol's pending request is gone too")

        await #expect(throws: ClientError.self) { try await alice.acceptContact("carol") }
        do {
            try await alice.addContact("nobody")
            Issue.record("a request to no user is refused")
        } catch {
            #expect(error.code == .unknownUser)
        }
        do {
            try await alice.unblock("carol")
            Issue.record("unblocking a user not blocked is refused")
        } catch {
            #expect(error.code == .badRequest)
        }
        for client in [alice, bob, carol] { await client.close() }
        await cluster.stop()
    }

    @Test func blockingAContactEndsTheContactOnBothSides() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        try await alice.addContact("bob")
        #expect(await bobLog.wait { $0.contactRequests == ["alice"] })
        try await bob.acceptContact("alice")
        #expect(await aliceLog.wait { $0.contactAcceptances == ["bob"] })
        let blocked = try await bob.block("alice")
        #expect(blocked.contacts.isEmpty && blocked.blocked == ["alice"])
        // alice sees what a removal would show her: no contact, and her messages refused.
        #expect(try await alice.contacts().contacts.isEmpty)
        // A read receipt from a blocked reader is not told either.
        let id = try await bob.send(to: "alice", text: "still talking to you")
        #expect(await aliceLog.wait { $0.messages.map(\.id) == [id] })
        try await alice.markRead(aliceLog.messages)
        try await bob.unblock("alice")
        let after = try await bob.send(to: "alice", text: "after")
        #expect(await aliceLog.wait { $0.messages.map(\.id).contains(after) })
        try await alice.markRead(aliceLog.messages.filter { $0.id == after })
        // In inbox order: had the first been told, it would have come first.
        #expect(await bobLog.wait { !$0.reads.isEmpty })
        #expect(bobLog.reads.map(\.id) == [after])
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    @Test func contactRequestsAreRateLimitedPerSender() async throws {
        let cluster = try await TestCluster.start { $0.contactRequestsPerHour = 2 }
        for user in ["bob", "carol", "dave"] { try await cluster.register(user) }
        let (alice, _) = try await cluster.connectedClient("alice")
        try await alice.addContact("bob")
        try await alice.addContact("carol")
        do {
            try await alice.addContact("dave")
            Issue.record("the third request in the hour is refused")
        } catch {
            #expect(error.code == .rateLimited)
        }
        #expect(try await alice.contacts().contacts.map(\.name) == ["bob", "carol"])
        await alice.close()
        await cluster.stop()
    }

    @Test func badSettingsAndContactRequestsGetClearErrors() async throws {
        let cluster = try await TestCluster.start()
        let (alice, _) = try await cluster.connectedClient("alice")
        #expect(try await alice.settings() == UserSettings())
        do {
            try await alice.addContact("alice")
            Issue.record("asking oneself is refused")
        } catch {
            #expect(error.code == .badRequest && error.message == "that is you")
        }
        await alice.close()
        await cluster.stop()
    }
}
