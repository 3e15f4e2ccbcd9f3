import Crypto
import NIOCore
import SIMPCore

/// What a datagram needs from the session it names before anything in it is believed.
protocol SealedPeer: AnyObject {
    var key: SymmetricKey { get }
    var replay: ReplayWindow { get set }
}

/// Bytes in, a decision out: which session a datagram belongs to and what it carries, or why
/// it is dropped. Nothing is parsed or acted on before it opens under the session key, exactly
/// once (the replay window).
enum DatagramIntake<Peer: SealedPeer> {
    enum Decision {
        case open(Peer, DatagramKind, payload: [UInt8])
        /// Too large to open; the session id it claims is unproven.
        case oversize
        case drop(DropReason)
    }

    static func decide(_ datagram: ByteBuffer, peers: (UInt64) -> Peer?) -> Decision {
        var buffer = datagram
        let header: DatagramHeader
        do {
            header = try Datagram.decodeHeader(&buffer)
        } catch .payloadTooLarge {
            return .oversize
        } catch {
            return .drop(.malformed)
        }
        guard let peer = peers(header.sessionID) else { return .drop(.unknownSession) }
        guard let payload = try? DatagramSeal.open(header, sealed: buffer, key: peer.key, direction: .toServer) else {
            return .drop(.unsealable)
        }
        guard peer.replay.accept(header.packetNumber) else { return .drop(.replayed) }
        switch header.kind {
        case .bind, .data, .keepalive, .bundle, .typing: return .open(peer, header.kind, payload: payload)
        case .pong, .challenge, .early, .presence, .keys: return .drop(.malformed)
        }
    }
}
