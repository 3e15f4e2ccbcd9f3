import Foundation
import MQTTLoad
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient
import SIMPCore
import SIMPTestSupport

/// Issue 24's receipt flood as a benchmark: the pattern's conversations are measured quiet,
/// then again while one logged-in session, with 64 messages waiting for it, writes
/// `receipt{upToSeq 0, missing 1...64}` frames as fast as its connection takes them (each
/// asks the server to send 64 stored messages again). The server paces requests by their cost
/// and resends by a byte budget, so the flooded figures should stay near the quiet ones.
public enum ReceiptFlood {
    public struct Result: Sendable {
        public var quiet: LoadResult
        public var flooded: LoadResult
        /// Flood bytes written during the flooded run (the server may slow the connection).
        public var floodBytes: Int
        public var floodClosedByServer: Bool
    }

    static let waiting = 64
    static let frames = 20_000

    /// The flooding session connects to the first node, which must be on this machine (`--spawn`).
    public static func run(_ pattern: LoadPattern, placement: Placement, group: any EventLoopGroup, processes: ProcessGroups,
                           progress: @escaping @Sendable (String) -> Void) async throws -> Result {
        let quiet = try await SIMPLoad.run(pattern, placement: placement, group: group, processes: processes, progress: progress)
        let node = placement.nodes[0]
        let peer = try floodingSession(port: node.port)
        try await fill(placement, group: group)
        progress("flooding: \(frames) receipts asking for \(waiting) messages each, written over and over")
        var receipt = Simp_Receipt()
        receipt.upToSeq = 0
        receipt.missing = Array(1...UInt64(waiting))
        let frame = peer.frame(Simp_Envelope(.receipt(receipt)))
        let flood = FrameFlood(peer, Array((0..<frames).map { _ in frame }.joined()), repeating: true)
        let flooded: LoadResult
        do {
            flooded = try await SIMPLoad.run(pattern, placement: placement, group: group, processes: processes, progress: progress)
        } catch {
            flood.stop()
            throw error
        }
        flood.stop()
        return Result(quiet: quiet, flooded: flooded, floodBytes: flood.written, floodClosedByServer: flood.closedByServer)
    }

    /// A session of "bench-flood", bound, over blocking sockets: the library would never send
    /// what it is about to.
    private static func floodingSession(port: Int) throws -> RawPeer {
        let peer = try RawPeer(tcpPort: port, udpPort: 0)
        var register = Simp_RegisterRequest()
        register.user = "bench-flood"
        register.password = SIMPLoad.password
        // Registered by an earlier run against the same Redis is fine too.
        _ = try peer.request(9, .register(register))
        try peer.connectAndBind(token: try peer.login("bench-flood", SIMPLoad.password))
        return peer
    }

    /// Messages waiting for the flooding session, which never confirms them.
    private static func fill(_ placement: Placement, group: any EventLoopGroup) async throws {
        let accepted = NIOLockedValueBox(0)
        let feeder = try await SIMPLoad.connectedClient("bench-feeder", placement.configuration(startingAt: 0), group) { event in
            if case .accepted = event { accepted.withLockedValue { $0 += 1 } }
        }
        for k in 0..<waiting { _ = try feeder.post(to: "bench-flood", text: "waiting #\(k)") }
        let deadline = ContinuousClock.now + .seconds(30)
        while accepted.withLockedValue({ $0 }) < waiting {
            guard ContinuousClock.now < deadline else { throw BenchError("the \(waiting) messages for bench-flood were not accepted in 30 s") }
            try await Task.sleep(for: .milliseconds(50))
        }
        await feeder.close()
    }
}
