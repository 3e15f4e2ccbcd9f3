import Foundation
import NIOCore
import Testing
@testable import SIMPClient

/// The one boundary between the library's public types and its inner ones (Conversions.swift).
@Suite struct ConversionsTests {
    @Test func theConfigurationsDurationsReachTheLoop() {
        var config = ClientConfiguration()
        config.requestTimeout = .seconds(3)
        config.retransmitBackoffCap = .milliseconds(100)
        config.giveUpAfter = .milliseconds(400)
        let times = config.loopTimes
        #expect(times.request == .seconds(3) && times.connect == .seconds(5) && times.keepalive == .seconds(25))
        #expect(times.retransmit.maxBackoff == .milliseconds(100) && times.retransmit.giveUpAfter == .milliseconds(400))
        #expect(times.reconnect.base == .seconds(2) && times.reconnect.cap == .seconds(64))
    }

    @Test func aWireTimeIsTheSameDateAndBack() {
        for millis: Int64 in [0, 1, 999, 1_700_000_000_123, 4_102_444_800_999] {
            #expect(Date(millis: millis).millis == millis)
        }
        #expect(Date.ifSet(millis: 0) == nil)
        var message = IncomingMessage(id: "m", from: "a", to: "b", text: "t", seq: 1, sentAt: Date(millis: 1_700_000_000_123))
        #expect(message.sentMillis == 1_700_000_000_123 && message.storedAt == nil)
        message.storedAt = Date(millis: 1_700_000_000_456)
        #expect(message.storedMillis == 1_700_000_000_456)
    }

    /// A token kept by an application (JSON, say) still says its expiry in milliseconds.
    @Test func aLoginTokenCodesItsExpiryInMilliseconds() throws {
        let token = LoginToken(value: "t", expiresMillis: 1_700_000_000_123)
        let json = String(decoding: try JSONEncoder().encode(token), as: UTF8.self)
        #expect(json.contains(#""expiresAt":1700000000123"#), "\(json)")
        #expect(try JSONDecoder().decode(LoginToken.self, from: Data(json.utf8)) == token)
        #expect(token.expiresAt == Date(timeIntervalSince1970: 1_700_000_000.123))
    }
}
