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
        #expect(try REPLCommand.parse("/logout") == .logout)
        #expect(try REPLCommand.parse("   ") == .empty)
        #expect(try REPLCommand.parse("/devices") == .devices)
        #expect(try REPLCommand.parse("/device revoke laptop") == .revokeDevice(name: "laptop"))
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
        ("/to Bob!", "not a user name: Bob!"),
    ])
    func badInputHasAClearError(line: String, message: String) {
        #expect(throws: REPLCommand.ParseError(message: message)) { try REPLCommand.parse(line) }
    }
}
