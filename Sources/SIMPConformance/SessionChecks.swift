import Foundation
import SIMPCore
import SIMPTestSupport

extension Conformance {
    /// Sessions replaced and revoked (sections 3 and 4, Devices), and heartbeats (section 5).
    static let sessions: [ConformanceCheck] = [
        ConformanceCheck("3.6", "3. Session set-up", "connect with a token the server never issued is INVALID_TOKEN") { target in
            let peer = try target.peer()
            let reply = try peer.request(2, .connect(.with { $0.token = "not.a.token.at-all" }))
            try expect(errorCode(reply) == .invalidToken, "got \(describe(reply))")
        },
        ConformanceCheck("3.7", "3. Session set-up", "a second session of the same device replaces the first: SESSION_REPLACED, then it closes") { target in
            let (first, _) = try target.connectedPeer("a", device: "twin")
            _ = try target.connectedPeer("a", device: "twin")
            var ended: Simp_Envelope?
            while ended == nil, let envelope = try first.read() {
                if case .error = envelope.body { ended = envelope }
            }
            try expect(errorCode(ended) == .sessionReplaced, "the first session got \(describe(ended))")
            try expect(try first.read() == nil && first.isClosedByServer(), "the replaced connection stayed open")
        },
        ConformanceCheck("4.9", "4. Messages, Devices", "revokeDevice: the device's session gets SESSION_CLOSED and its token DEVICE_REVOKED") { target in
            let (user, password) = try target.account("b")
            let device = "r" + String(UInt16.random(in: 0...UInt16.max), radix: 36)
            let doomed = try target.peer()
            let token = try doomed.login(user, password, device: device)
            guard case .connected? = try doomed.request(2, .connect(.with { $0.token = token; $0.device = device }))?.body else {
                throw ConformanceFailure("connect of \(device) refused")
            }
            let (other, _) = try target.connectedPeer("b", device: "keeper")
            let answer = try other.request(3, .revokeDevice(.with { $0.name = device }))
            guard case .ok? = answer?.body else { throw ConformanceFailure("revokeDevice: \(describe(answer))") }
            var ended: Simp_Envelope?
            while ended == nil, let envelope = try doomed.read() {
                if case .error = envelope.body { ended = envelope }
            }
            try expect(errorCode(ended) == .sessionClosed, "the revoked device's session got \(describe(ended))")
            let again = try target.peer()
            let refused = try again.request(4, .connect(.with { $0.token = token; $0.device = device }))
            try expect(errorCode(refused) == .deviceRevoked, "connect with the old token got \(describe(refused))")
            let renamed = try again.request(5, .connect(.with { $0.token = token; $0.device = device + "x" }))
            try expect(errorCode(renamed) == .invalidToken, "the revoked device's token under another name got \(describe(renamed))")
        },
        ConformanceCheck("3.8", "3. Session set-up", "a token opens a session only for the device named at its login: another device's connect is INVALID_TOKEN") { target in
            let (user, password) = try target.account("b")
            let peer = try target.peer()
            let token = try peer.login(user, password, device: "bound")
            let other = try peer.request(2, .connect(.with { $0.token = token; $0.device = "elsewhere" }))
            try expect(errorCode(other) == .invalidToken, "connect as another device got \(describe(other))")
            let own = try peer.request(3, .connect(.with { $0.token = token; $0.device = "bound" }))
            guard case .connected(let connected)? = own?.body else { throw ConformanceFailure("connect as its own device: \(describe(own))") }
            try expect(connected.device == "bound", "connected names device \(connected.device)")
        },
        ConformanceCheck("5.1", "5. Liveness", "a connected peer that writes nothing is pinged within 1.5 heartbeats") { target in
            let (peer, connected) = try target.connectedPeer("a")
            let heartbeat = Double(connected.heartbeatMillis) / 1000
            try expect(heartbeat > 0, "connected carries no heartbeatMillis")
            peer.setReadTimeout(seconds: Int((heartbeat * 1.5).rounded(.up)))
            var ping: Simp_Ping?
            while ping == nil, let envelope = try peer.read() {
                if case .ping(let p) = envelope.body { ping = p }
            }
            try expect(ping != nil, "no ping within 1.5 x \(heartbeat) s")
        },
        ConformanceCheck("5.2", "5. Liveness", "a connected peer that answers nothing is closed after max(1.5H, H + 1 s), not before H") { target in
            let (peer, connected) = try target.connectedPeer("a")
            let heartbeat = Double(connected.heartbeatMillis) / 1000
            let started = Date()
            // The wheel's tick (H/16, at most 1 s) and a slow path on top of the limit.
            peer.setReadTimeout(seconds: Int((max(1.5 * heartbeat, heartbeat + 1) + 3).rounded(.up)))
            while try peer.read() != nil {}
            let waited = Date().timeIntervalSince(started)
            try expect(peer.isClosedByServer(), "still open after \(Int(waited)) s")
            try expect(waited >= heartbeat, "closed after \(waited) s, before one heartbeat (\(heartbeat) s)")
        },
    ]
}
