import Foundation
import SIMPClient
import SIMPTerminal
import Testing

@Suite struct ANSIStyleTests {
    @Test func paintsOnlyWhenEnabled() {
        #expect(ANSIStyle(enabled: true).paint("hi", .bold, .red) == "\u{1B}[1;31mhi\u{1B}[0m")
        #expect(ANSIStyle(enabled: false).paint("hi", .bold, .red) == "hi")
        #expect(ANSIStyle(enabled: true).paint("", .red) == "")
    }

    @Test func colourNeedsATerminalAndNoNoColor() {
        #expect(ANSIStyle.forOutput(isTerminal: true, environment: [:]).enabled)
        #expect(ANSIStyle.forOutput(isTerminal: true, environment: ["NO_COLOR": ""]).enabled, "empty NO_COLOR does not count")
        #expect(!ANSIStyle.forOutput(isTerminal: true, environment: ["NO_COLOR": "1"]).enabled)
        #expect(!ANSIStyle.forOutput(isTerminal: false, environment: [:]).enabled)
    }
}

@Suite struct SentMarksTests {
    @Test func numbersMessagesAndShowsEachStepOnce() {
        var marks = SentMarks()
        #expect(marks.register(id: "a", to: "bob").number == 1)
        #expect(marks.register(id: "b", to: "carol").number == 2)
        #expect(marks.update(id: "a", to: .accepted) == .init(number: 1, to: "bob", stage: .accepted))
        #expect(marks.update(id: "a", to: .accepted) == nil, "a repeat")
        #expect(marks.update(id: "a", to: .delivered)?.stage == .delivered)
        #expect(marks.update(id: "a", to: .accepted) == nil, "never backwards")
        #expect(marks.update(id: "b", to: .failed, reason: "no such user")?.reason == "no such user")
        #expect(marks.update(id: "b", to: .delivered) == nil, "failed is final")
        #expect(marks.pendingCount == 0)
        #expect(marks.sentCount == 2)
    }

    @Test func aChangeThatOvertakesTheSendWaitsForIt() {
        var marks = SentMarks()
        #expect(marks.update(id: "a", to: .accepted) == nil)
        let (number, changes) = marks.register(id: "a", to: "bob")
        #expect(number == 1)
        #expect(changes == [.init(number: 1, to: "bob", stage: .accepted)])
        #expect(marks.pendingCount == 1)
    }

    @Test func changesOfUnsentMessagesAreHandedOverAtTheSecondSweep() {
        var marks = SentMarks()
        _ = marks.update(id: "old", to: .delivered)
        #expect(marks.takeUnregistered().isEmpty, "give the send a moment to return")
        let taken = marks.takeUnregistered()
        #expect(taken.map(\.id) == ["old"] && taken.first?.stage == .delivered)
        #expect(marks.takeUnregistered().isEmpty)
    }
}

@Suite struct REPLCompletionTests {
    let users = ["alice", "bob", "bobby"]

    @Test func completesTheCommand() {
        #expect(REPLCompletion.complete("/sen", users: users) == .init(insert: "d ", alternatives: []))
        #expect(REPLCompletion.complete("/se", users: users) == .init(insert: "", alternatives: ["/send", "/set"]))
        #expect(REPLCompletion.complete("/h", users: users) == .init(insert: "", alternatives: ["/help", "/history"]))
        #expect(REPLCompletion.complete("", users: users).alternatives == REPLCompletion.commands.sorted())
        #expect(REPLCompletion.complete("/x", users: users) == .init(insert: "", alternatives: []))
    }

    @Test func completesTheUserAfterACommandThatTakesOne() {
        #expect(REPLCompletion.complete("/send al", users: users) == .init(insert: "ice ", alternatives: []))
        #expect(REPLCompletion.complete("/history b", users: users) == .init(insert: "ob", alternatives: ["bob", "bobby"]))
        #expect(REPLCompletion.complete("/send bob", users: users) == .init(insert: "", alternatives: ["bob", "bobby"]))
        #expect(REPLCompletion.complete("/status a", users: users) == .init(insert: "", alternatives: []))
        #expect(REPLCompletion.complete("/send bob he", users: users) == .init(insert: "", alternatives: []), "text is not completed")
    }

    @Test func knownUsersComeFromLinesAndOnlyValidNames() {
        var known = KnownUsers()
        known.learn(fromLine: "/send bob hi")
        known.learn(fromLine: "/history carol 5")
        known.learn(fromLine: "/image dave https://x/y.png")
        known.learn(fromLine: "/help")
        known.add("evil\u{1B}[2J")
        known.add("Upper")
        #expect(known.sorted == ["bob", "carol", "dave"])
    }
}

@Suite struct REPLScreenTests {
    let utc = TimeZone(identifier: "UTC")!
    let session = REPLScreen.Session(server: "127.0.0.1:7700", user: "alice", tls: false)

    func message(from: String, text: String, at millis: Int64 = 1_700_000_000_000, image: String? = nil) -> IncomingMessage {
        IncomingMessage(id: "1", from: from, to: "alice", text: text, imageURL: image.flatMap(URL.init(string:)), seq: 1,
                        sentAt: Date(millisSince1970: millis), storedAt: Date(millisSince1970: millis))
    }

    /// `/to bob` shows in the prompt; what alice sent to bob from another device names bob.
    @Test func theConversationIsInThePrompt() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.converse(with: "bob") == "talking to bob: plain lines go there; /to alone ends it")
        #expect(screen.prompt == "alice → bob> ")
        #expect(screen.promptColumns == "alice → bob> ".count)
        #expect(screen.users.sorted.contains("bob"))
        let copy = IncomingMessage(id: "7", from: "alice", to: "bob", text: "from my phone", seq: 2, sentAt: Date(millisSince1970: 1_700_000_000_000),
                                   storedAt: Date(millisSince1970: 1_700_000_000_000), fromDevice: "phone")
        #expect(screen.handle(.message(copy), now: Date()) == ["22:13 alice → bob: from my phone"])
        _ = screen.converse(with: nil)
        #expect(screen.prompt == "alice> ")
        #expect(screen.promptColumns == "alice> ".count)
    }

    /// A malicious server's doing, said as a warning line (no secret: names, an epoch, MLS's reason).
    @Test func securityWarningsAreErrorLines() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.handle(.uncertifiedDevice(user: "bob", device: "evil"), now: Date()) == [
            "error: the server lists a device evil of bob that bob's identity never certified: "
                + "nothing is encrypted to it (the server, or someone with access to it, added it)"])
        #expect(screen.handle(.commitRefused(conversation: "bob", epoch: 2, reason: "wrongEpoch(expected: 2, got: 1)"), now: Date()) == [
            "error: the server's commit for epoch 2 of bob was refused (wrongEpoch(expected: 2, got: 1)): "
                + "this device stays at its epoch and cannot read what was sent after it"])
    }

    @Test func plainLinesWithoutColour() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.prompt == "alice> ")
        #expect(screen.sent(id: "9", to: "bob", text: "hello") == ["→ bob: hello  #1 …"])
        #expect(screen.handle(.accepted(id: "9", to: "bob", seq: 3), now: Date()) == ["#1 ✓ accepted"])
        #expect(screen.handle(.delivered(id: "9", to: "bob", seq: 3), now: Date()) == ["#1 ✓✓ delivered"])
        #expect(screen.sent(id: "10", to: "nobody", text: "hi") == ["→ nobody: hi  #2 …"])
        #expect(screen.handle(.failed(id: "10", to: "nobody", reason: "no such user: nobody"), now: Date())
                == ["#2 ✗ failed: no such user: nobody"])
        // 1_700_000_000 s is 22:13:20 UTC.
        #expect(screen.handle(.message(message(from: "bob", text: "hi")), now: Date()) == ["22:13 bob: hi"])
        #expect(screen.handle(.message(message(from: "bob", text: "look", image: "https://x/c.png")), now: Date())
                == ["22:13 bob: [image] https://x/c.png look"])
        #expect(screen.status() == ["server 127.0.0.1:7700, TLS off (plain TCP), user alice (connected, path udp)",
                                    "sent this run: 2, pending (not yet delivered or failed): 0",
                                    "received this run: 2"])
        #expect(screen.users.sorted == ["alice", "bob", "nobody"])
    }

    @Test func untrustedTextIsEscapedEvenInColour() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: true), timeZone: utc)
        let line = screen.handle(.message(message(from: "bob", text: "\u{1B}[2Jgone")), now: Date())[0]
        #expect(line.contains("\\e[2Jgone"))
        #expect(!line.contains("\u{1B}[2J"))
        #expect(line.contains("\u{1B}[2m22:13\u{1B}[0m"), "the time is dim")
        let failed = screen.handle(.failed(id: "x", to: "b", reason: "r\u{1B}]0;t\u{07}"), now: Date())
        #expect(failed.isEmpty, "held until the send registers")
        #expect(screen.sent(id: "x", to: "b", text: "t").last?.contains("r\\e]0;t\\x07") == true)
    }

    @Test func fatesOfMessagesFromAnEarlierRunShowTheStartOfTheirId() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.handle(.delivered(id: "1208829999", to: "bob", seq: 1), now: Date()).isEmpty)
        #expect(screen.unregisteredChanges().isEmpty)
        #expect(screen.unregisteredChanges() == ["your message to bob (120882) ✓✓ delivered"])
    }

    /// A group's delivered and read marks name the member; another device's group message's
    /// marks say which message and whose they are (bob's phone no longer prints `message 500835
    /// ✓✓ delivered` twice for his laptop's message, naming no one).
    @Test func groupMarksNameTheMemberAndAnotherDevicesSayWhichMessage() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        _ = screen.sent(id: "g1", to: "#team", text: "hi")
        #expect(screen.handle(.groupAccepted(id: "g1", to: "#team", seq: 4, recipients: 2), now: Date()) == ["#1 ✓ accepted"])
        #expect(screen.handle(.memberDelivered(id: "g1", to: "#team", member: "carol", seq: 4), now: Date()) == ["#1 ✓✓ delivered to carol"])
        #expect(screen.handle(.memberDelivered(id: "g1", to: "#team", member: "dave", seq: 4), now: Date()) == ["#1 ✓✓ delivered to dave"])
        #expect(screen.handle(.memberDelivered(id: "g1", to: "#team", member: "dave", seq: 4), now: Date()).isEmpty, "once each")
        #expect(screen.handle(.read(id: "g1", from: session.user, by: "carol"), now: Date()) == ["#1 ✓✓ read by carol"])

        for member in ["carol", "dave"] {
            #expect(screen.handle(.memberDelivered(id: "5008351234", to: "#team", member: member, seq: 9), now: Date()).isEmpty)
        }
        #expect(screen.unregisteredChanges().isEmpty)
        #expect(screen.unregisteredChanges() == ["your message to #team (500835) ✓✓ delivered to carol",
                                                 "your message to #team (500835) ✓✓ delivered to dave"])
    }

    @Test func firstConnectIsTheBannersAndAReconnectIsShown() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.banner().first == "simp connected to 127.0.0.1:7700 as alice, TLS off (plain TCP)")
        #expect(screen.handle(.connected(user: "alice"), now: Date()).isEmpty)
        #expect(screen.handle(.reconnecting(attempt: 1, delay: .milliseconds(100)), now: Date()) == ["reconnecting in 100 ms (attempt 1)"])
        #expect(screen.status()[0].hasSuffix("(reconnecting, path udp)"))
        #expect(screen.handle(.connected(user: "alice"), now: Date()) == ["connected as alice"])
    }

    /// `/status` says which way messages travel, and a change of path is a line of its own.
    @Test func theStatusNamesThePathAndAChangeIsShown() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false), timeZone: utc)
        #expect(screen.handle(.connected(user: "alice", path: .stream), now: Date()).isEmpty)
        #expect(screen.status()[0].hasSuffix("(connected, path stream)"))
        #expect(screen.handle(.path(.udp), now: Date()) == ["UDP works: messages travel over UDP again"])
        #expect(screen.status()[0].hasSuffix("(connected, path udp)"))
        #expect(screen.handle(.path(.stream), now: Date()) == ["UDP does not get through: messages now travel inside the control connection"])
    }

    @Test func colourPromptHidesItsSequencesFromLibedit() {
        let screen = REPLScreen(session: session, style: ANSIStyle(enabled: true), timeZone: utc)
        #expect(screen.prompt == "\u{1}\u{1B}[1;34m\u{1}alice>\u{1}\u{1B}[0m\u{1} ")
    }

    @Test func helpIsGroupedByTopic() {
        let help = REPLScreen(session: session, style: ANSIStyle(enabled: false)).help()
        #expect(help.contains("messages:") && help.contains("history:") && help.contains("session:"))
        #expect(help.contains { $0.contains("/status") })
    }

    @Test func historyFileFollowsXDG() {
        #expect(REPLHistoryFile.path(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]) == "/s/simp/history")
        #expect(REPLHistoryFile.path(environment: ["XDG_STATE_HOME": "relative", "HOME": "/h"]) == "/h/.local/state/simp/history")
        #expect(REPLHistoryFile.path(environment: [:]) == nil)
    }
}

@Suite struct REPLTypingTests {
    let session = REPLScreen.Session(server: "localhost:7777", user: "alice", tls: false)

    @Test func thePeerTypingShowsInThePromptForAFewSeconds() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false))
        _ = screen.converse(with: "bob")
        let start = Date(timeIntervalSince1970: 1_000)
        #expect(screen.handle(.typing(from: "bob"), now: start).isEmpty)
        #expect(screen.prompt == "alice → bob (bob is typing…)> ")
        #expect(screen.promptColumns == screen.prompt.count)
        let early = screen.typingExpired(now: start.addingTimeInterval(3))
        #expect(!early)
        _ = screen.handle(.typing(from: "carol"), now: start.addingTimeInterval(3))
        #expect(screen.prompt == "alice → bob (bob is typing…)> ", "only the conversation's peer shows")
        let expired = screen.typingExpired(now: start.addingTimeInterval(4.5))
        #expect(expired)
        #expect(screen.prompt == "alice → bob> ")
    }

    @Test func typingIsToldAtMostEveryFewSecondsAndNotForCommands() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false))
        let start = Date(timeIntervalSince1970: 1_000)
        var told: [String?] = [screen.userTyped("hel", now: start)]
        _ = screen.converse(with: "bob")
        told.append(screen.userTyped("/his", now: start))
        told.append(screen.userTyped("h", now: start))
        told.append(screen.userTyped("he", now: start.addingTimeInterval(1)))
        told.append(screen.userTyped("hello", now: start.addingTimeInterval(3)))
        _ = screen.converse(with: "#team")
        told.append(screen.userTyped("hi all", now: start.addingTimeInterval(10)))
        // No conversation, a command, then bob, too soon, bob again, and never to a group.
        #expect(told == [nil, nil, "bob", nil, "bob", nil])
    }

    @Test func whatTheOpenConversationShowsIsReadAndTheRestOnRead() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false))
        func message(_ id: String, from: String, seq: UInt64) -> IncomingMessage {
            IncomingMessage(id: id, from: from, to: "alice", text: "t", imageURL: nil, seq: seq, sentAt: Date(millisSince1970: 1), storedAt: Date(millisSince1970: 1))
        }
        _ = screen.converse(with: "bob")
        _ = screen.handle(.message(message("1", from: "bob", seq: 1)), now: Date())
        _ = screen.handle(.message(message("2", from: "carol", seq: 2)), now: Date())
        _ = screen.handle(.message(message("3", from: "carol", seq: 0)), now: Date())
        #expect(screen.reads.takeDue().map(\.id) == ["1"], "bob's conversation is open")
        #expect(screen.reads.markAll(from: "carol") == 1, "one never numbered cannot be marked")
        #expect(screen.reads.takeDue().map(\.id) == ["2"])
        _ = screen.handle(.message(message("4", from: "carol", seq: 4)), now: Date())
        _ = screen.handle(.read(id: "4", from: "carol", by: "alice"), now: Date())
        #expect(screen.reads.markAll(from: "carol") == 0, "read on another device")
    }

    @Test func aGroupsMessagesAreReadInTheGroupsConversation() {
        var screen = REPLScreen(session: session, style: ANSIStyle(enabled: false))
        func message(_ id: String, from: String, seq: UInt64, group: String?, place: UInt64) -> IncomingMessage {
            var message = IncomingMessage(id: id, from: from, to: group.map { "#\($0)" } ?? "alice", text: "t", seq: seq,
                                          sentAt: Date(millisSince1970: 1))
            message.group = group
            message.groupSeq = place
            return message
        }
        _ = screen.converse(with: "#team")
        _ = screen.handle(.message(message("1", from: "bob", seq: 1, group: "team", place: 4)), now: Date())
        _ = screen.handle(.message(message("2", from: "bob", seq: 2, group: nil, place: 0)), now: Date())
        _ = screen.handle(.message(message("3", from: "bob", seq: 3, group: "club", place: 9)), now: Date())
        _ = screen.handle(.message(message("4", from: "bob", seq: 4, group: "team", place: 0)), now: Date())
        #expect(screen.reads.takeDue().map(\.id) == ["1"], "#team is open; one without its place cannot be marked")
        #expect(screen.reads.markAll(from: "bob") == 1, "bob's own conversation, not his messages in groups")
        #expect(screen.reads.markAll(from: "#club") == 1)
        #expect(screen.reads.takeDue().map(\.id) == ["2", "3"])
    }
}
