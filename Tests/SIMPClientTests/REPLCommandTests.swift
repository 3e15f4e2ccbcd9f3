import SIMPClient
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
    }

    @Test(arguments: [
        ("/send", "usage: /send USER TEXT..."),
        ("/send bob", "usage: /send USER TEXT..."),
        ("/image bob", "usage: /image USER URL"),
        ("/history", "usage: /history USER [N]"),
        ("/history bob lots", "N must be a number from 1 to 1000"),
        ("/frobnicate", "unknown command /frobnicate (try /help)"),
        ("hello", "lines are commands; to send text use /send USER TEXT (try /help)"),
    ])
    func badInputHasAClearError(line: String, message: String) {
        #expect(throws: REPLCommand.ParseError(message: message)) { try REPLCommand.parse(line) }
    }
}
