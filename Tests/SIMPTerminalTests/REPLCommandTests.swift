import SIMPClient
import SIMPTerminal
import Testing

@Suite struct REPLCommandTests {
    @Test func parsesEachCommand() throws {
        #expect(try REPLCommand.parse("/send bob hello there") == .send(to: "bob", text: "hello there"))
        #expect(try REPLCommand.parse("  /image bob https://x/y.png ") == .image(to: "bob", url: "https://x/y.png"))
        #expect(try REPLCommand.parse("/history bob") == .history(peer: "bob", limit: 20))
        #expect(try REPLCommand.parse("/history bob 5") == .history(peer: "bob", limit: 5))
        #expect(try REPLCommand.parse("/help") == .help)
        #expect(try REPLCommand.parse("/quit") == .quit)
        #expect(try REPLCommand.parse("/logout") == .logout(everywhere: false))
        #expect(try REPLCommand.parse("/logout --all") == .logout(everywhere: true))
        #expect(throws: REPLCommand.ParseError.self) { try REPLCommand.parse("/logout everything") }
        #expect(throws: REPLCommand.ParseError(message: "change your password with simp password (it asks without echo); every other login of yours then ends")) {
            try REPLCommand.parse("/password")
        }
        #expect(try REPLCommand.parse("   ") == .empty)
        #expect(try REPLCommand.parse("/devices") == .devices)
        #expect(try REPLCommand.parse("/device revoke laptop") == .revokeDevice(name: "laptop"))
    }

    /// Linking a device: `/device link` on the new one, `/device links` and `/device approve
    /// NAME CODE` on one holding the identity; the code is 6 digits, spaces allowed.
    @Test func deviceLinkCommands() throws {
        #expect(try REPLCommand.parse("/device link") == .linkDevice)
        #expect(try REPLCommand.parse("/device links") == .deviceLinks)
        #expect(try REPLCommand.parse("/device approve laptop 012345") == .approveLink(name: "laptop", code: "012345"))
        #expect(try REPLCommand.parse("/device approve laptop 012 345") == .approveLink(name: "laptop", code: "012345"))
        for bad in ["/device approve laptop 12345", "/device approve laptop 1234567", "/device approve laptop abcdef",
                    "/device approve Not!A!Name 123456", "/device approve laptop", "/device link now", "/device"] {
            #expect(throws: REPLCommand.ParseError.self, "\(bad)") { try REPLCommand.parse(bad) }
        }
    }

    /// `/to USER` starts a conversation; plain lines then go there; commands still work.
    @Test func plainLinesGoToTheConversation() throws {
        #expect(try REPLCommand.parse("/to bob") == .converse(with: "bob"))
        #expect(try REPLCommand.parse("/to") == .converse(with: nil))
        #expect(try REPLCommand.parse("  hello there ", conversation: "bob") == .send(to: "bob", text: "hello there"))
        #expect(try REPLCommand.parse("/send carol hi", conversation: "bob") == .send(to: "carol", text: "hi"))
        #expect(try REPLCommand.parse("", conversation: "bob") == .empty)
    }

    @Test(arguments: [
        ("/send", "usage: /send USER TEXT..."),
        ("/send bob", "usage: /send USER TEXT..."),
        ("/image bob", "usage: /image USER URL"),
        ("/history", "usage: /history USER [N]"),
        ("/history bob lots", "N must be a number from 1 to 1000"),
        ("/frobnicate", "unknown command /frobnicate (try /help)"),
        ("hello", "lines are commands; to send text use /send USER TEXT, or /to USER first (try /help)"),
        ("/to bob carol", "usage: /to USER, or /to alone to end the conversation"),
        ("/to Bob!", "not a user name or #group: Bob!"),
    ])
    func badInputHasAClearError(line: String, message: String) {
        #expect(throws: REPLCommand.ParseError(message: message)) { try REPLCommand.parse(line) }
    }
}

@Suite struct GroupCommandTests {
    @Test func parsesGroupCommands() throws {
        #expect(try REPLCommand.parse("/groups") == .groups)
        #expect(try REPLCommand.parse("/group create team bob carol") == .group(.create(name: "team", members: ["bob", "carol"])))
        #expect(try REPLCommand.parse("/group create #team") == .group(.create(name: "team", members: [])))
        #expect(try REPLCommand.parse("/group add team dave") == .group(.add(name: "team", users: ["dave"])))
        #expect(try REPLCommand.parse("/group remove team  dave erin") == .group(.remove(name: "team", users: ["dave", "erin"])))
        #expect(try REPLCommand.parse("/group admin team bob") == .group(.admin(name: "team", users: ["bob"])))
        #expect(try REPLCommand.parse("/group leave team") == .group(.leave(name: "team")))
        #expect(try REPLCommand.parse("/group members #team") == .group(.members(name: "team")))
        #expect(try REPLCommand.parse("/send #team hi all") == .send(to: "#team", text: "hi all"))
        #expect(try REPLCommand.parse("/to #team") == .converse(with: "#team"))
        #expect(try REPLCommand.parse("hello", conversation: "#team") == .send(to: "#team", text: "hello"))
    }

    @Test(arguments: ["/group", "/group add team", "/group leave team bob", "/group drop team", "/group create Team",
                      "/group add team Bob", "/groups x", "/to #Bad"])
    func refusesMalformedGroupCommands(_ line: String) {
        #expect(throws: REPLCommand.ParseError.self) { try REPLCommand.parse(line) }
    }

    @Test func completesGroupsAndTheirCommands() {
        var known = KnownUsers()
        known.learn(fromLine: "/group create team bob")
        known.add("#crew")
        let names = known.sorted
        #expect(names == ["#crew", "#team", "bob"])
        #expect(REPLCompletion.complete("/to #t", users: names) == .init(insert: "eam ", alternatives: []))
        #expect(REPLCompletion.complete("/group m", users: names) == .init(insert: "embers ", alternatives: []))
        #expect(REPLCompletion.complete("/group add #c", users: names) == .init(insert: "rew ", alternatives: []))
        #expect(REPLCompletion.complete("/group add #team b", users: names) == .init(insert: "ob ", alternatives: []))
        #expect(REPLCompletion.complete("/group add #team #", users: names).alternatives.isEmpty, "members are users")
        #expect(REPLCompletion.complete("/gr", users: names) == .init(insert: "oup", alternatives: ["/group", "/groups"]))
    }
}

@Suite struct ContactCommandTests {
    @Test func parsesContactCommands() throws {
        #expect(try REPLCommand.parse("/contacts") == .contact(.list))
        #expect(try REPLCommand.parse("/contact add bob") == .contact(.add("bob")))
        #expect(try REPLCommand.parse("/contact accept  bob") == .contact(.accept("bob")))
        #expect(try REPLCommand.parse("/contact decline bob") == .contact(.decline("bob")))
        #expect(try REPLCommand.parse("/contact remove bob") == .contact(.remove("bob")))
        #expect(try REPLCommand.parse("/block bob") == .contact(.block("bob")))
        #expect(try REPLCommand.parse("/unblock bob") == .contact(.unblock("bob")))
        #expect(try REPLCommand.parse("/blocked") == .contact(.blocked))
        #expect(try REPLCommand.parse("/set contacts-only on") == .contact(.set(.contactsOnly, "on")))
        #expect(try REPLCommand.parse("/set contacts-only off") == .contact(.set(.contactsOnly, "off")))
        #expect(try REPLCommand.parse("/set") == .contact(.settings))
        #expect(try REPLCommand.parse("/set read-receipts off") == .contact(.set(.readReceipts, "off")))
        #expect(try REPLCommand.parse("/set group-adds nobody") == .contact(.set(.groupAdds, "nobody")))
        #expect(throws: REPLCommand.ParseError.self) { try REPLCommand.parse("/set group-adds on") }
        #expect(throws: REPLCommand.ParseError.self) { try REPLCommand.parse("/set contacts-only everyone") }
        #expect(try REPLCommand.parse("/group accept #team") == .group(.accept(name: "team")))
        #expect(try REPLCommand.parse("/group decline team") == .group(.decline(name: "team")))
        #expect(throws: REPLCommand.ParseError.self) { try REPLCommand.parse("/group accept team bob") }
        #expect(try REPLCommand.parse("/read bob") == .read(peer: "bob"))
        #expect(try REPLCommand.parse("/read #team") == .read(peer: "#team"))
    }

    @Test func verifyTakesAUserAndOptionallyTheComparedNumber() throws {
        let digits = String(repeating: "12345", count: 12)
        #expect(try REPLCommand.parse("/verify bob") == .verify(user: "bob", number: nil))
        #expect(try REPLCommand.parse("/verify bob " + stride(from: 0, to: 60, by: 5).map { _ in "12345" }.joined(separator: " "))
            == .verify(user: "bob", number: digits))
        for bad in ["/verify", "/verify #team", "/verify bob 123", "/verify bob " + String(repeating: "x", count: 60)] {
            #expect(throws: REPLCommand.ParseError.self, "\(bad)") { try REPLCommand.parse(bad) }
        }
    }

    @Test(arguments: [
        ("/contact", REPLCommand.contactUsage),
        ("/contact add", REPLCommand.contactUsage),
        ("/contact befriend bob", REPLCommand.contactUsage),
        ("/contacts bob", REPLCommand.contactUsage),
        ("/block", REPLCommand.contactUsage),
        ("/block Bob", "not a user name: Bob"),
        ("/contact add #team", "not a user name: #team"),
        ("/set contacts-only maybe", "contacts-only is on, off; not maybe"),
        ("/set typing off", "no such setting: typing (there are: contacts-only, read-receipts, last-seen, group-adds)"),
        ("/read", "usage: /read USER|#GROUP"),
        ("/read Bob", "not a user or group name: Bob"),
        ("/set contacts-only", "usage: /set NAME VALUE, or /set alone for your settings"),
    ])
    func refusesMalformedContactCommands(_ line: String, _ message: String) {
        #expect(throws: REPLCommand.ParseError(message: message)) { try REPLCommand.parse(line) }
    }

    @Test func completesContactCommands() {
        let names = ["#team", "bob"]
        #expect(REPLCompletion.complete("/contact a", users: names) == .init(insert: "", alternatives: ["accept", "add"]))
        #expect(REPLCompletion.complete("/contact add b", users: names) == .init(insert: "ob ", alternatives: []))
        #expect(REPLCompletion.complete("/block b", users: names) == .init(insert: "ob ", alternatives: []))
        #expect(REPLCompletion.complete("/set c", users: names) == .init(insert: "ontacts-only ", alternatives: []))
        #expect(REPLCompletion.complete("/read b", users: names) == .init(insert: "ob ", alternatives: []))
        #expect(REPLCompletion.complete("/set contacts-only o", users: names) == .init(insert: "", alternatives: ["off", "on"]))
    }
}

@Suite struct ReadMarkTests {
    @Test func readFollowsOnlyDelivered() {
        var marks = SentMarks()
        _ = marks.register(id: "m", to: "bob")
        #expect(marks.update(id: "m", to: .read) != nil, "a read implies delivery")
        #expect(marks.update(id: "m", to: .delivered) == nil, "never back")
        _ = marks.register(id: "n", to: "bob")
        #expect(marks.update(id: "n", to: .delivered)?.stage == .delivered)
        #expect(marks.update(id: "n", to: .read)?.stage == .read)
        #expect(marks.update(id: "n", to: .failed) == nil)
    }
}
