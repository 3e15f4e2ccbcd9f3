import SIMPChaos
import Testing

/// Synthetic logs, one per kind of violation: a broken build that lost, doubled, reordered or
/// misreported a message must be caught.
@Suite struct CheckerTests {
    /// alice sends `count` messages to bob; each is accepted and delivered, bob shows each once.
    func cleanRun(count: Int = 3) -> (alice: [LogEvent], bob: [LogEvent]) {
        var alice: [LogEvent] = [.other("connected")]
        var bob: [LogEvent] = [.other("connected")]
        for n in 0..<count {
            let id = "a\(n)"
            alice += [.sent(id: id, to: "bob"), .accepted(id: id, to: "bob", seq: n + 1)]
            bob.append(.message(id: id, from: "alice", text: MessageText.make(sender: "alice", index: n), seq: n + 1))
            alice.append(.delivered(id: id, to: "bob", seq: n + 1))
        }
        return (alice, bob)
    }

    func check(_ alice: [LogEvent], _ bob: [LogEvent], excused: Set<String> = []) -> CheckReport {
        Checker.check([ClientLog(user: "alice", events: alice), ClientLog(user: "bob", events: bob)], excused: excused)
    }

    @Test func aCleanRunHasNoViolation() {
        let (alice, bob) = cleanRun()
        let report = check(alice, bob)
        #expect(report.violations == [])
        #expect(report.messages == 3)
        #expect(report.accepted == 3)
        #expect(report.delivered == 3)
    }

    @Test func anAcceptedMessageNeverShownIsLost() {
        var (alice, bob) = cleanRun()
        bob.removeAll { $0 == .message(id: "a1", from: "alice", text: "alice#1", seq: 2) }
        alice.removeAll { $0 == .delivered(id: "a1", to: "bob", seq: 2) }
        let report = check(alice, bob)
        #expect(report.count(.lostAccepted) == 1)
        #expect(report.violations.contains { $0.kind == .lostAccepted && $0.id == "a1" })
        // Never told delivered or failed either.
        #expect(report.count(.unresolved) == 1)
    }

    @Test func aMessageShownTwiceIsADuplicate() {
        var (alice, bob) = cleanRun()
        // Again after a restart of bob's client: still one recipient, so still a duplicate.
        bob += [.killed, .other("connected"), .message(id: "a2", from: "alice", text: "alice#2", seq: 3)]
        let report = check(alice, bob)
        #expect(report.count(.duplicate) == 1)
        #expect(report.violations.map(\.kind) == [.duplicate])
    }

    @Test func aLaterMessageShownFirstIsReordered() {
        var (alice, bob) = cleanRun()
        bob.swapAt(2, 3)
        let report = check(alice, bob)
        #expect(report.violations.map(\.kind) == [.reordered])
        #expect(report.violations.first?.id == "a1")
    }

    @Test func orderIsPerConversation() {
        let (alice, bob) = cleanRun(count: 2)
        // carol's messages interleave with alice's, in carol's own order: fine.
        let carol: [LogEvent] = [.sent(id: "c0", to: "bob"), .accepted(id: "c0", to: "bob", seq: 9), .delivered(id: "c0", to: "bob", seq: 9)]
        var shown = bob
        shown.insert(.message(id: "c0", from: "carol", text: "carol#0", seq: 9), at: 2)
        let report = Checker.check([ClientLog(user: "alice", events: alice), ClientLog(user: "bob", events: shown),
                                    ClientLog(user: "carol", events: carol)])
        #expect(report.violations == [])
        #expect(report.messages == 3)
    }

    @Test func aCertainFailureThatWasShownIsAViolation() {
        var (alice, bob) = cleanRun(count: 1)
        alice = [.sent(id: "a0", to: "bob"), .failed(id: "a0", to: "bob", reason: "message store unavailable: connection refused")]
        let report = check(alice, bob)
        #expect(report.violations.map(\.kind) == [.failedYetReceived])
        _ = bob
        bob = []
        #expect(check(alice, bob).violations == [])
    }

    @Test func anAmbiguousFailureMayBeShownOrNot() {
        let alice: [LogEvent] = [
            .sent(id: "a0", to: "bob"), .failed(id: "a0", to: "bob", reason: "message store unavailable: timeout; it may still be delivered"),
            .sent(id: "a1", to: "bob"), .failed(id: "a1", to: "bob", reason: "message store unavailable: timeout; it may still be delivered"),
        ]
        let bob: [LogEvent] = [.message(id: "a0", from: "alice", text: "alice#0", seq: 1)]
        let report = check(alice, bob)
        #expect(report.violations == [])
        #expect(report.ambiguousFailed == 2)
        #expect(report.failureReasons == ["message store unavailable": 2])
        #expect(report.ambiguousReceived == 1)
        #expect(report.failed == 0)
    }

    @Test func deliveredButNeverShownIsAViolation() {
        var (alice, bob) = cleanRun()
        bob.removeLast()
        let report = check(alice, bob)
        #expect(report.count(.deliveredNotShown) == 1)
        #expect(report.violations.contains { $0.kind == .deliveredNotShown && $0.id == "a2" })
    }

    @Test func deliveredAndKeptOnDiskButNeverShownIsTheDocumentedWindow() {
        var (alice, bob) = cleanRun()
        bob.removeLast()
        bob.append(.killed)
        let report = Checker.check([ClientLog(user: "alice", events: alice), ClientLog(user: "bob", events: bob)], keptOnDisk: ["a2"])
        #expect(report.violations == [])
        #expect(report.keptNotShown == 1)
        // Kept on disk does not excuse a message that was never delivered and never shown.
        alice.removeLast()
        let lost = Checker.check([ClientLog(user: "alice", events: alice), ClientLog(user: "bob", events: bob)], keptOnDisk: ["a2"])
        #expect(lost.count(.lostAccepted) == 1)
    }

    @Test func aMessageWithoutAFinalStateIsUnresolved() {
        let alice: [LogEvent] = [.sent(id: "a0", to: "bob")]
        let report = check(alice, [])
        #expect(report.violations.map(\.kind) == [.unresolved])
        // Its fate may come in the sender's next run (killed, restarted on its data directory).
        let later = alice + [.killed, .other("connected"), .accepted(id: "a0", to: "bob", seq: 1), .delivered(id: "a0", to: "bob", seq: 1)]
        #expect(check(later, [.message(id: "a0", from: "alice", text: "alice#0", seq: 1)]).violations == [])
    }

    @Test func acceptedThenFailedIsContradictory() {
        let alice: [LogEvent] = [.sent(id: "a0", to: "bob"), .accepted(id: "a0", to: "bob", seq: 1),
                                 .failed(id: "a0", to: "bob", reason: "no such user")]
        #expect(check(alice, []).violations.map(\.kind) == [.contradictory])
    }

    @Test func aLossWhereRedisWasLetLoseWritesIsExcused() {
        var (alice, bob) = cleanRun()
        bob.removeLast()
        alice.removeLast()
        let report = check(alice, bob, excused: ["a2"])
        #expect(report.violations == [])
        #expect(report.excusedLost == 1)
    }

    @Test func aSendWhoseLineWasCutOffIsCountedNotBlamed() {
        let (alice, bob) = cleanRun(count: 1)
        let shown = bob + [.message(id: "zz", from: "alice", text: "alice#1", seq: 2)]
        let report = check(alice, shown)
        #expect(report.violations == [])
        #expect(report.unloggedSends == 1)
    }

    @Test func parsesTheLinesSimpPrints() {
        let text = """
        {"event":"connected","user":"alice"}
        {"event":"sent","id":"5125357213186040311","to":"bob"}
        {"event":"accepted","id":"5125357213186040311","seq":3,"to":"bob"}
        {"event":"delivered","id":"5125357213186040311","seq":3,"to":"bob"}
        {"event":"failed","id":"7","reason":"no such user: nobody","to":"nobody"}
        {"event":"message","from":"bob","id":"9","receivedAt":1,"seq":4,"sentAt":1,"text":"bob#0"}
        {"event":"chaos-kill"}
        {"event":"sent","id":"12
        """
        #expect(LogEvent.parseLog(text) == [
            .connected(path: ""), .sent(id: "5125357213186040311", to: "bob"),
            .accepted(id: "5125357213186040311", to: "bob", seq: 3), .delivered(id: "5125357213186040311", to: "bob", seq: 3),
            .failed(id: "7", to: "nobody", reason: "no such user: nobody"),
            .message(id: "9", from: "bob", text: "bob#0", seq: 4), .killed,
        ])
    }

    @Test func readsThePathLinesOfAUDPBlock() {
        let text = """
        {"event":"connected","path":"udp","user":"alice"}
        {"event":"path","path":"stream"}
        {"event":"sent","id":"1","to":"bob"}
        {"event":"path","path":"udp"}
        """
        let events = LogEvent.parseLog(text)
        #expect(events == [.connected(path: "udp"), .path("stream"), .sent(id: "1", to: "bob"), .path("udp")])
        // Path lines change nothing for the checker.
        let (alice, bob) = cleanRun()
        #expect(check([.path("stream")] + alice + [.path("udp")], [.path("stream")] + bob).violations == [])
        var block = UDPBlockOutcome(user: "alice", at: 10, heal: 17.5, droppedToServer: 12, droppedToClient: 30,
                                    pathsWhileBlocked: UDPBlockOutcome.paths(events.prefix(3)), pathsAfter: UDPBlockOutcome.paths(events.dropFirst(3)))
        #expect(block.movedToStream && block.backOnUDP)
        #expect(block.description == "alice: UDP blocked t=10.00-17.50s, 42 datagrams dropped (12 to the node, 30 to the client); "
            + "moved to the stream while blocked, back on UDP after the heal")
        block.pathsAfter = []
        #expect(block.movedToStream && !block.backOnUDP)
        // A new session after the heal (a node restarted) that binds over UDP is back on UDP.
        block.pathsAfter = UDPBlockOutcome.paths(LogEvent.parseLog("""
            {"event":"disconnected","reason":"closed"}
            {"event":"connected","path":"udp","user":"alice"}
            """))
        #expect(block.pathsAfter == ["udp"] && block.backOnUDP)
        block.pathsWhileBlocked = []
        #expect(!block.movedToStream)
    }

    // MARK: end-to-end encrypted runs

    /// `cleanRun` with every message shown decrypted, as `simp --e2e` prints it.
    func encryptedRun(count: Int = 3) -> (alice: [LogEvent], bob: [LogEvent]) {
        var (alice, bob) = cleanRun(count: count)
        bob = bob.map { event in
            guard case .message(let id, let from, let text, let seq, _) = event else { return event }
            return .message(id: id, from: from, text: text, seq: seq, encrypted: true)
        }
        return (alice, bob)
    }

    func checkEncrypted(_ alice: [LogEvent], _ bob: [LogEvent], endToEnd: Bool = true) -> CheckReport {
        Checker.check([ClientLog(user: "alice", events: alice), ClientLog(user: "bob", events: bob)], endToEnd: endToEnd)
    }

    @Test func anEncryptedRunWithEveryMessageDecryptedIsClean() {
        let (alice, bob) = encryptedRun()
        let report = checkEncrypted(alice, bob)
        #expect(report.violations == [])
        #expect(report.decrypted == 3)
        #expect(report.undecryptable == 0)
    }

    @Test func aMessageItsRecipientCouldNotDecryptIsAViolation() {
        var (alice, bob) = encryptedRun()
        // bob was killed and came back without the keys for a1: confirmed (alice sees
        // delivered), reported, not shown.
        let index = bob.firstIndex { if case .message("a1", _, _, _, _) = $0 { true } else { false } }!
        bob[index] = .undecryptable(id: "a1", from: "alice", reason: "no state for this conversation")
        let report = checkEncrypted(alice, bob)
        #expect(report.violations.map(\.kind) == [.undecryptable])
        #expect(report.violations.first?.id == "a1")
        #expect(report.violations.first?.detail.contains("no state for this conversation") == true)
        #expect(report.undecryptable == 1)
        #expect(report.decrypted == 2)
        // A plaintext run that meets one is held to it too.
        #expect(checkEncrypted(alice, bob, endToEnd: false).violations.map(\.kind) == [.undecryptable])
    }

    @Test func aMessageShownWithoutDecryptionInAnEncryptedRunIsNotEncrypted() {
        var (alice, bob) = encryptedRun()
        let index = bob.firstIndex { if case .message("a2", _, _, _, _) = $0 { true } else { false } }!
        bob[index] = .message(id: "a2", from: "alice", text: "alice#2", seq: 3)
        let report = checkEncrypted(alice, bob)
        #expect(report.violations.map(\.kind) == [.notEncrypted])
        #expect(report.violations.first?.id == "a2")
        #expect(report.decrypted == 2)
        // The same log of a plaintext run is clean.
        #expect(checkEncrypted(alice, bob, endToEnd: false).violations == [])
        #expect(check(cleanRun().alice, cleanRun().bob).violations == [])
    }

    @Test func parsesEncryptedAndUndecryptableLines() {
        let text = """
        {"encrypted":true,"event":"message","from":"bob","fromDevice":"d1","id":"9","receivedAt":1,"seq":4,"sentAt":1,"text":"bob#0","to":"alice"}
        {"event":"message","from":"bob","id":"10","receivedAt":1,"seq":5,"sentAt":1,"text":"bob#1"}
        {"event":"undecryptable","from":"bob","id":"11","reason":"not a member of this conversation's group"}
        """
        #expect(LogEvent.parseLog(text) == [
            .message(id: "9", from: "bob", text: "bob#0", seq: 4, encrypted: true),
            .message(id: "10", from: "bob", text: "bob#1", seq: 5, encrypted: false),
            .undecryptable(id: "11", from: "bob", reason: "not a member of this conversation's group"),
        ])
    }
}
