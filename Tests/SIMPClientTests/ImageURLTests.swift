import Foundation
import SIMPClient
import SIMPCore
import Testing

@Suite struct ImageURLTests {
    @Test func onlyWebURLsAreAllowed() {
        for url in ["http://example.org/a.png", "https://example.org/a.png", "HTTPS://EXAMPLE.ORG/A.PNG", "Http://x"] {
            #expect(MessageRules.isAllowedImageURL(url), "\(url)")
        }
        for url in ["javascript:alert(1)", "file:///etc/passwd", "data:image/png;base64,AAAA", "ftp://example.org/a.png",
                    "httpx://a", "http:/a", " https://a", "", "\u{1B}]8;;https://a"] {
            #expect(!MessageRules.isAllowedImageURL(url), "\(url)")
        }
    }

    @Test func theServersRuleRefusesAnImageWithAnotherScheme() {
        var message = Simp_Message()
        message.messageID = "1"
        message.toUser = "bob"
        message.type = .image
        message.imageURL = "file:///etc/passwd"
        #expect(MessageRules.problem(in: message)?.code == .badRequest)
        #expect(MessageRules.problem(in: message)?.reason == "imageURL must start with http:// or https://")
        message.imageURL = "https://example.org/cat.png"
        #expect(MessageRules.problem(in: message)?.reason == nil)
        // Set on any type of message, the URL is checked: a recipient may still show it.
        message.type = .text
        message.imageURL = "javascript:alert(1)"
        #expect(MessageRules.problem(in: message)?.code == .badRequest)
    }

    /// The library refuses before anything is queued: no connection is needed to find out.
    @Test func theLibraryRefusesToSendAnImageWithAnotherScheme() async {
        let client = SIMPClient(configuration: ClientConfiguration(host: "127.0.0.1", port: 1))
        await #expect(throws: ClientError("imageURL must start with http:// or https://, got javascript:alert(1)", code: .badRequest)) {
            try await client.send(to: "bob", imageURL: URL(string: "javascript:alert(1)")!)
        }
        #expect(await client.outstandingCount() == 0)
        await client.close()
    }
}
