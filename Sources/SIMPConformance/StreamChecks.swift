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
        ConformanceCheck("2.7", "2. Datagrams, The stream path",
                         "a path change mid-conversation: a session on UDP that asks for the stream (an empty BIND inside the connection) is pushed there, and its UDP probe, challenged and answered, moves it back") { target in
            let (xPeer, xUser) = try target.boundPeer("p")
            let (y, yUser) = try target.boundPeer("q")
            guard let xSession = xPeer.session else { throw ConformanceFailure("no session") }
            try strangers(xPeer, xUser, y, yUser)
            // Pushed over UDP first.
            func pushedOverUDP(_ id: String) throws -> Simp_Message? {
                while let datagram = try xPeer.receiveDatagram(seconds: 5) {
                    guard datagram.header.kind == .data || datagram.header.kind == .bundle else { continue }
                    let payloads = datagram.header.kind == .data ? [datagram.payload] : try DatagramBundle.split(datagram.payload)
                    for payload in payloads {
                        let message = try Simp_Message(serializedBytes: payload)
                        if message.messageID == id { return message }
                    }
                }
                return nil
            }
            y.sendDatagram(.data, try message(id: "c1", to: xUser, order: 1))
            guard let first = try pushedOverUDP("c1") else { throw ConformanceFailure("c1 was not pushed over UDP") }
            xPeer.writeRaw(xPeer.frame(Simp_Envelope(requestID: 51, .receipt(.with { $0.upToSeq = first.seq }))))
            // The client's word that UDP went quiet: an empty BIND inside the connection, numbered
            // past what went over UDP (one numbering for both paths).
            let x = StreamPeer((xPeer, xSession))
            x.skipPacketNumbers(to: 1_000)
            x.send(.bind, [])
            guard let moved = try x.next(where: { if case .bound = $0.body { true } else { false } }),
                  case .bound(let onStream) = moved.body else { throw ConformanceFailure("an empty BIND inside the connection was not answered with bound") }
            try expect(onStream.address.isEmpty, "moved to the stream, so bound names no address: \(onStream.address)")
            y.sendDatagram(.data, try message(id: "c2", to: xUser, order: 2))
            var second: Simp_Message?
            while second?.messageID != "c2", let next = try x.nextPush() { second = next }
            guard let second, second.messageID == "c2" else { throw ConformanceFailure("c2 was not pushed inside the connection") }
            xPeer.writeRaw(xPeer.frame(Simp_Envelope(requestID: 52, .receipt(.with { $0.upToSeq = second.seq }))))
            let stray = try xPeer.receiveDatagram(seconds: 1)
            try expect(stray == nil, "a datagram over UDP after the move: \(String(describing: stray?.header))")
            // Back: a BIND over UDP is challenged; the answer over the connection moves the session.
            xPeer.sendDatagram(.bind, Array(xSession.bindToken))
            var challenge: [UInt8]?
            while challenge == nil, let datagram = try xPeer.receiveDatagram(seconds: 5) {
                if datagram.header.kind == .challenge { challenge = datagram.payload }
            }
            guard let token = challenge else { throw ConformanceFailure("the UDP probe of a session on the stream was not challenged") }
            xPeer.writeRaw(xPeer.frame(Simp_Envelope(requestID: 0, .pathResponse(.with { $0.token = Data(token) }))))
            guard let back = try x.next(where: { if case .bound = $0.body { true } else { false } }),
                  case .bound(let onUDP) = back.body else { throw ConformanceFailure("no bound after pathResponse") }
            try expect(!onUDP.address.isEmpty, "back on UDP, bound names the address")
            y.sendDatagram(.data, try message(id: "c3", to: xUser, order: 3))
            guard let third = try pushedOverUDP("c3") else { throw ConformanceFailure("c3 was not pushed over UDP after the move back") }
            try expect(third.seq > second.seq && second.seq > first.seq, "one order across the changes: \(first.seq), \(second.seq), \(third.seq)")
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

    /// Numbers from `number` on: a session that sent over UDP before goes on with its one count.
    func skipPacketNumbers(to number: UInt64) {
        nextPacket = number
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
