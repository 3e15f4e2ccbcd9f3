import NIOCore
import NIOPosix
import SIMPCore
import Testing
@testable import SIMPServer

/// The node's logins with the time handed in by the caller: a revocation refuses the logins it
/// ends for its while, counted from when it was heard, never from a clock of the table's own.
struct LoginTableTests {
    @Test func aHeardRevocationRefusesTheLoginsItEndsUntilItsWhileIsOver() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The table only keeps a login's channel, to close it later: any open channel does.
        let channel = try await DatagramBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
        let table = LoginTable(revocations: RecentRevocations(keepFor: .seconds(60)))
        let heard = NIODeadline.uptimeNanoseconds(5_000_000_000)
        table.revoked(user: "alice", device: "phone", at: 100, with: .error(.sessionClosed, "revoked"), now: heard)

        #expect(!table.loggedIn(1, user: "alice", device: "phone", tokenIssued: 100, channel: channel, now: heard + .seconds(59)))
        #expect(table.loggedIn(2, user: "alice", device: "phone", tokenIssued: 101, channel: channel, now: heard + .seconds(59)),
                "a token issued after the revocation outlives it")
        #expect(table.loggedIn(3, user: "alice", device: "phone", tokenIssued: 100, channel: channel, now: heard + .seconds(60)),
                "forgotten once its while is over")
        #expect(table.count(of: "alice") == 2)
        try await channel.close()
        try await group.shutdownGracefully()
    }
}
