import Crypto
import NIOCore
import SIMPCore
import Testing
@testable import SIMPServer

@Suite struct DatagramIntakeTests {
    final class Peer: SealedPeer {
        let key = DatagramSeal.newKey()
        var replay = ReplayWindow()
    }

    let peer = Peer()
    let sessionID: UInt64 = 42

    func decide(_ datagram: ByteBuffer) -> DatagramIntake<Peer>.Decision {
        DatagramIntake.decide(datagram, peers: { $0 == sessionID ? peer : nil })
    }

    func sealed(_ kind: DatagramKind, packet: UInt64, payload: [UInt8] = [1, 2, 3], key: SymmetricKey? = nil,
                session: UInt64? = nil, direction: DatagramDirection = .toServer) throws -> ByteBuffer {
        let header = DatagramHeader(kind: kind, sessionID: session ?? sessionID, packetNumber: packet)
        return try DatagramSeal.seal(header, payload: payload, key: key ?? peer.key, direction: direction)
    }

    @Test func aSealedDatagramOpensOnceUnderItsSessionKey() throws {
        let datagram = try sealed(.data, packet: 1)
        guard case .open(let opened, .data, let payload) = decide(datagram) else {
            Issue.record("not opened")
            return
        }
        #expect(opened === peer && payload == [1, 2, 3])
        guard case .drop(.replayed) = decide(datagram) else {
            Issue.record("a replay was not dropped")
            return
        }
    }

    @Test func nothingUnprovenIsOpened() throws {
        let cases: [(ByteBuffer, DropReason)] = [
            (ByteBuffer(bytes: [0xFF, 0, 1]), .malformed),
            (try sealed(.data, packet: 1, session: 7), .unknownSession),
            (try sealed(.data, packet: 2, key: DatagramSeal.newKey()), .unsealable),
            (try sealed(.data, packet: 3, direction: .toClient), .unsealable),
            (try sealed(.pong, packet: 4), .malformed),
            // EARLY goes only server -> client: a client's is opened, then dropped.
            (try sealed(.early, packet: 5), .malformed),
        ]
        for (datagram, reason) in cases {
            guard case .drop(let got) = decide(datagram) else {
                Issue.record("\(reason): not dropped")
                continue
            }
            #expect(got == reason)
        }
        // Only the pong and the early datagram opened (a kind the server never receives is
        // dropped after opening).
        #expect(peer.replay.highest == 5)
    }

    @Test func anOversizeDatagramIsReportedAsSuch() throws {
        var datagram = try sealed(.data, packet: 1)
        datagram.writeBytes([UInt8](repeating: 0, count: Datagram.maxSize))
        guard case .oversize = decide(datagram) else {
            Issue.record("not reported oversize")
            return
        }
    }
}
