import Foundation
import NIOCore
@testable import SIMPClient
import SIMPCore
import SIMPTestSupport
import Testing

/// A read mark made the moment its message is handed over reaches the sender (the race
/// `simp listen --mark-read` lost about one run in six): the client sends the receipt of what
/// it marks first, on the same connection, and the server takes a connection's frames in order.
/// Against a real server and Redis; a mark the server leaves out is counted
/// (`simp_read_marks_left_out_total`), so a loss shows as a number, not as a wait.
@Suite(.serialized) struct ReadMarkOrderTests {
    static let count = 40
    static let unconfirmed = #"simp_read_marks_left_out_total{reason="unconfirmed"}"#

    /// The worst interleaving, every time: the mark is written from the event handler on the
    /// client's loop (what `markRead` does on it), while the actions of the datagram that
    /// brought the message, its turn-end receipt among them, are still being carried out.
    @Test func aMarkWrittenAsTheMessageIsHandedOverIsTold() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let marked = Box<[EventLoopFuture<Simp_Envelope>]>([])
        let holder = Box<SIMPClient?>(nil)
        let bob = SIMPClient(configuration: cluster.clientConfiguration()) { event in
            guard case .message(let message) = event, let client = holder.value else { return }
            var mark = Simp_ReadMark()
            mark.fromUser = message.from
            mark.messageID = message.markID
            mark.seq = message.seq
            var request = Simp_ReadRequest()
            request.reads = [mark]
            let answer = client.loop.makePromise(of: Simp_Envelope.self)
            client.request(.markRead(request), id: client.newRequestID(), answering: answer)
            marked.value += [answer.futureResult]
        }
        holder.value = bob
        try await bob.connect(user: "bob", password: "pw-bob")

        var ids: [String] = []
        for index in 1...Self.count { ids.append(try await alice.send(to: "bob", text: "m\(index)")) }
        #expect(await aliceLog.wait { $0.reads.count == Self.count || cluster.metric(Self.unconfirmed) > 0 })
        #expect(cluster.metric(Self.unconfirmed) == 0, "marks left out as not yet confirmed")
        #expect(Set(aliceLog.reads.map(\.id)) == Set(ids))
        for answer in marked.value {
            if case .ok = try await answer.get().body {} else { Issue.record("a mark was not answered ok") }
        }
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }

    /// As `simp listen --mark-read` does: each message marked read from the events stream as
    /// soon as it comes.
    @Test func everyMessageMarkedOnArrivalIsReadAtTheSender() async throws {
        let cluster = try await TestCluster.start()
        try await cluster.register("bob")
        let (alice, aliceLog) = try await cluster.connectedClient("alice")
        let bob = SIMPClient(configuration: cluster.clientConfiguration())
        try await bob.connect(user: "bob", password: "pw-bob")
        let marking = Task {
            var marked = 0
            for await event in bob.events {
                guard case .message(let message) = event else { continue }
                try await bob.markRead([message])
                marked += 1
                if marked == Self.count { return }
            }
        }
        var ids: [String] = []
        for index in 1...Self.count { ids.append(try await alice.send(to: "bob", text: "m\(index)")) }
        try await marking.value
        #expect(await aliceLog.wait { $0.reads.count == Self.count || cluster.metric(Self.unconfirmed) > 0 })
        #expect(cluster.metric(Self.unconfirmed) == 0, "marks left out as not yet confirmed")
        #expect(Set(aliceLog.reads.map(\.id)) == Set(ids))
        for client in [alice, bob] { await client.close() }
        await cluster.stop()
    }
}

/// A value shared with the event handler, under a lock.
private final class Box<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) {
        stored = value
    }

    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
