import Crypto
import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// The stream path (section 2, The stream path): sealed datagrams inside the control
    /// connection, for a peer whose UDP does not get through.
    static let stream: [ConformanceCheck] = [
        ConformanceCheck("4.22", "4. Messages, The stream path",
                         "a peer that never sends UDP binds over the stream and sends and receives there: accepted, pushed inside the connection, confirmed, delivered") { target in
            let x = try StreamPeer(target.connectedPeer("s"))
            let y = try StreamPeer(target.connectedPeer("t"))
            try strangers(x.peer, x.user, y.peer, y.user)
            for peer in [x, y] {
                peer.send(.bind, Array(peer.connected.bindToken))
                guard let bound = try peer.next(where: { if case .bound = $0.body { true } else { false } }),
                      case .bound(let answer) = bound.body else { throw ConformanceFailure("a BIND over the stream was not answered with bound") }
                try expect(answer.address.isEmpty, "bound on the stream names no address: \(answer.address)")
            }
            x.send(.data, try message(id: "w1", to: y.user, order: 1))
            let answers = try x.peer.answers(until: "w1")
            try expect(answers.last?.kind == "accepted", "a message sent over the stream: \(answers)")
            // Past anything an earlier check left in y's inbox.
            var pushed: Simp_Message?
            while pushed?.messageID != "w1", let next = try y.nextPush() { pushed = next }
            guard let pushed, pushed.messageID == "w1" else { throw ConformanceFailure("w1 was not pushed inside the connection") }
            try expect(pushed.messageID == "w1" && pushed.fromUser == x.user && pushed.seq > 0, "pushed \(pushed)")
            y.peer.writeRaw(y.peer.frame(Simp_Envelope(requestID: 50, .receipt(.with { $0.upToSeq = pushed.seq }))))
            guard let delivered = try x.next(where: { if case .delivered = $0.body { true } else { false } }),
                  case .delivered(let notice) = delivered.body else { throw ConformanceFailure("the sender was not told delivered") }
            try expect(notice.messageID == "w1", "delivered names \(notice.messageID)")
            // Nothing came over UDP: the server sends a stream-bound session nothing there.
            let stray = try y.peer.receiveDatagram(seconds: 1)
            try expect(stray == nil, "a datagram over UDP to a session on the stream: \(String(describing: stray?.header))")
        },
    ]
}

/// A connected raw peer that sends its datagrams inside its control connection, numbered from
/// 1 (it sends none over UDP), and reads the server's from there.
final class StreamPeer {
    let peer: RawPeer
    let connected: Simp_ConnectResponse
    private var nextPacket: UInt64 = 1

    var user: String { connected.user }

    init(_ opened: (peer: RawPeer, connected: Simp_ConnectResponse)) {
        (peer, connected) = opened
    }

    func send(_ kind: DatagramKind, _ payload: [UInt8]) {
        let header = DatagramHeader(kind: kind, sessionID: connected.sessionID, packetNumber: nextPacket)
        nextPacket += 1
        let key = SymmetricKey(data: connected.sessionKey)
        let sealed = try! DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer, allocator: ByteBufferAllocator())
        peer.writeRaw(peer.frame(Simp_Envelope(.datagram(Data(sealed.readableBytesView)))))
    }

    /// The next control frame that `matches`, past others; nil when the connection goes quiet.
    func next(where matches: (Simp_Envelope) -> Bool) throws -> Simp_Envelope? {
        while let envelope = try peer.read() {
            if matches(envelope) { return envelope }
        }
        return nil
    }

    /// The next message pushed inside the connection (DATA, or a BUNDLE's first).
    func nextPush() throws -> Simp_Message? {
        let key = SymmetricKey(data: connected.sessionKey)
        while let envelope = try peer.read() {
            guard case .datagram(let bytes) = envelope.body else { continue }
            var buffer = ByteBuffer(bytes: bytes)
            let header = try Datagram.decodeHeader(&buffer)
            let payload = try DatagramSeal.open(header, sealed: buffer, key: key, direction: .toClient)
            switch header.kind {
            case .data: return try Simp_Message(serializedBytes: payload)
            case .bundle: return try DatagramBundle.split(payload).first.map { try Simp_Message(serializedBytes: $0) }
            default: continue
            }
        }
        return nil
    }
}
