import SIMPClient
import Testing

@Suite(.serialized) struct NATTests {
    /// bob's UDP source address changes mid-session (new socket, new port): the server
    /// challenges the new address, bob answers over TCP, and delivery goes on both ways.
    @Test func newSourceAddressIsRevalidatedAndKeepsReceiving() async throws {
        let cluster = try await TestCluster.start()
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let (bob, bobLog) = try await cluster.connectedClient("bob")
        let first = try await alice.send(to: "bob", text: "before")
        #expect(await bobLog.wait { $0.messages.map(\.id) == [first] })

        try await bob.rebindUDP()
        let second = try await alice.send(to: "bob", text: "after")
        #expect(await bobLog.wait(timeout: .seconds(10)) { $0.messages.map(\.id) == [first, second] })
        let reply = try await bob.send(to: "alice", text: "from the new port")
        #expect(await aliceLog.wait(timeout: .seconds(10)) { $0.messages.map(\.id) == [reply] })
        #expect(await aliceLog.wait { $0.delivered == [first, second] })
        await alice.disconnect()
        await bob.disconnect()
        await cluster.stop()
    }
}
