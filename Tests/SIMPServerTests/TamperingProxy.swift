import Crypto
import Foundation
import NIOCore
import SIMPCore
import SIMPTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A server with one rule of docs/PROTOCOL.md broken, for the conformance checks to catch: it
/// stands between the peers and a real server (plain TCP, so it reads each session's key and
/// bind token in `connected`) and changes what it forwards so that, seen from the peer, the
/// server breaks that rule. With no rule it forwards everything unchanged.
final class TamperingProxy: @unchecked Sendable {
    enum Rule: Equatable {
        /// A replayed datagram is acted on again (the proxy seals it under a fresh number).
        case acceptsReplays
        /// A BIND with a wrong token binds (the proxy puts the session's token in).
        case acceptsForeignBindTokens
        /// `bound` carries a request id (the proxy sets one).
        case boundCarriesARequestID
        /// Every second key directory answer for the user names another identity key, with a
        /// device of its own certified by it (a server trying to slip a device in between the
        /// fetch a client pins the identity from and the one it reads the devices from).
        case twoIdentities(of: String)
        /// Every key directory answer for the user names another user ("mallory") as its own.
        case namesAnotherUser(for: String)
    }

    let rule: Rule?
    let tcpPort: Int
    private let serverTCP: Int
    private let serverUDP: Int
    private let listener: Int32
    /// The socket the peers send their datagrams to.
    private let udp: Int32
    private let udpPort: Int
    private let state = Locked(Sessions())

    private let stopped = Locked(false)

    private struct Sessions {
        var connected: [UInt64: Simp_ConnectResponse] = [:]
        /// Per client address, the proxy's socket toward the server.
        var upstreams: [String: Int32] = [:]
        var seen: Set<[UInt64]> = []
        var nextFresh: UInt64 = 1_000_000
        /// Key directory answers for `Rule.twoIdentities`'s user so far.
        var directoryAnswers = 0
    }

    /// The forged identity of `Rule.twoIdentities`, and the device it certifies.
    let forgedIdentity = Curve25519.Signing.PrivateKey()
    let forgedDevice = Curve25519.Signing.PrivateKey()

    init(serverTCP: Int, serverUDP: Int, rule: Rule?) throws {
        self.rule = rule
        self.serverTCP = serverTCP
        self.serverUDP = serverUDP
        (listener, tcpPort) = try Self.bound(Int32(SOCK_STREAM.rawValue))
        (udp, udpPort) = try Self.bound(Int32(SOCK_DGRAM.rawValue))
        guard listen(listener, 16) == 0 else { throw TestSupportError("listen failed") }
        Thread { [self] in acceptLoop() }.start()
        Thread { [self] in relayDatagrams() }.start()
    }

    /// A socket on 127.0.0.1 and a free port, and that port.
    private static func bound(_ type: Int32) throws -> (Int32, Int) {
        let fd = socket(AF_INET, type, 0)
        var addr = RawPeer.loopback(0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { throw TestSupportError("cannot bind a proxy socket") }
        return (fd, Int(UInt16(bigEndian: addr.sin_port)))
    }

    // MARK: control connections

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = RawPeer.loopback(serverTCP)
            let rc = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard rc == 0 else { close(client); continue }
            Thread { Self.pump(from: client, to: server) }.start()
            Thread { [self] in pumpFrames(from: server, to: client) }.start()
        }
    }

    private static func pump(from source: Int32, to target: Int32) {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            guard n > 0, write(chunk.prefix(n), to: target) else { break }
        }
        shutdown(target, Int32(SHUT_WR))
    }

    private static func write(_ bytes: ArraySlice<UInt8>, to fd: Int32) -> Bool {
        bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// The server's frames, each passed through `rewrite`.
    private func pumpFrames(from server: Int32, to client: Int32) {
        var parser = FrameParser()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { break }
            parser.append(contentsOf: chunk.prefix(n))
            while let envelope = try? parser.next() {
                guard Self.write(ArraySlice(Frame.encode(rewrite(envelope)).readableBytesView), to: client) else { return }
            }
        }
        shutdown(client, Int32(SHUT_WR))
    }

    private func rewrite(_ envelope: Simp_Envelope) -> Simp_Envelope {
        var envelope = envelope
        switch envelope.body {
        case .connected(var connected):
            state.withLockedValue { $0.connected[connected.sessionID] = connected }
            connected.udpPort = UInt32(udpPort)
            envelope.body = .connected(connected)
        case .bound where rule == .boundCarriesARequestID:
            envelope.requestID = 77
        case .keyDirectoryEntry(let entry) where rule == .twoIdentities(of: entry.user):
            let count = state.withLockedValue { $0.directoryAnswers += 1; return $0.directoryAnswers }
            if count.isMultiple(of: 2) { envelope.body = .keyDirectoryEntry(forged(entry)) }
        case .keyDirectoryEntry(var entry) where rule == .namesAnotherUser(for: entry.user):
            entry.user = "mallory"
            envelope.body = .keyDirectoryEntry(entry)
        default:
            break
        }
        return envelope
    }

    /// `entry` with the forged identity key and one device, "slipped", certified by it alone.
    private func forged(_ entry: Simp_KeyDirectoryEntry) -> Simp_KeyDirectoryEntry {
        var forged = entry
        forged.identityKey = forgedIdentity.publicKey.rawRepresentation
        let deviceKey = Array(forgedDevice.publicKey.rawRepresentation)
        let signed = DeviceCertificateTBS.bytes(user: entry.user, device: "slipped", deviceKey: deviceKey)
        forged.devices = [.with {
            $0.device = "slipped"
            $0.deviceKey = Data(deviceKey)
            $0.signature = (try? forgedIdentity.signature(for: signed)) ?? Data()
        }]
        return forged
    }

    // MARK: datagrams

    /// Each client address gets a socket of its own toward the server, so that the server sees
    /// an address change where the client made one.
    private func relayDatagrams() {
        var bytes = [UInt8](repeating: 0, count: 2048)
        while true {
            var from = sockaddr_in()
            guard let datagram = Self.receive(on: udp, into: &bytes, from: &from),
                  let id = Datagram.sessionID(peeking: ByteBuffer(bytes: datagram)) else {
                if stopped.withLockedValue({ $0 }) { return } else { continue }
            }
            guard let upstream = upstream(for: from) else { continue }
            Self.sendDatagram(tamper(datagram, session: id), on: upstream, to: RawPeer.loopback(serverUDP))
        }
    }

    private func upstream(for client: sockaddr_in) -> Int32? {
        let key = "\(client.sin_addr.s_addr):\(client.sin_port)"
        return state.withLockedValue { sessions -> Int32? in
            if let known = sessions.upstreams[key] { return known }
            guard let (fd, _) = try? Self.bound(Int32(SOCK_DGRAM.rawValue)) else { return nil }
            sessions.upstreams[key] = fd
            Thread { [self] in
                var bytes = [UInt8](repeating: 0, count: 2048)
                var from = sockaddr_in()
                while let datagram = Self.receive(on: fd, into: &bytes, from: &from) { Self.sendDatagram(datagram, on: udp, to: client) }
            }.start()
            return fd
        }
    }

    private static func receive(on fd: Int32, into bytes: inout [UInt8], from: inout sockaddr_in) -> [UInt8]? {
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let n = bytes.withUnsafeMutableBytes { buffer in
            withUnsafeMutablePointer(to: &from) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, buffer.baseAddress, buffer.count, 0, $0, &length) }
            }
        }
        return n > 0 ? Array(bytes.prefix(n)) : nil
    }

    private static func sendDatagram(_ datagram: [UInt8], on fd: Int32, to address: sockaddr_in) {
        var address = address
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { to in
                datagram.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, to, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
    }

    /// A client's datagram as the broken rule would have the server take it. Only a datagram
    /// the rule changes is opened: opening every one made the proxy (a debug build) slower than
    /// the server's message budget, and check 7.1's burst then never reached the limit.
    private func tamper(_ datagram: [UInt8], session id: UInt64) -> [UInt8] {
        guard let rule, rule == .acceptsReplays || rule == .acceptsForeignBindTokens, let connected = state.withLockedValue({ $0.connected[id] }) else { return datagram }
        var buffer = ByteBuffer(bytes: datagram)
        guard let header = try? Datagram.decodeHeader(&buffer) else { return datagram }
        var resealed = header
        switch rule {
        case .acceptsReplays:
            // Numbers are noted from the header: a forged datagram's number (check 2.2) is
            // never used again by the genuine ones, which count on.
            let replay = state.withLockedValue { !$0.seen.insert([id, header.packetNumber]).inserted }
            guard replay else { return datagram }
            resealed.packetNumber = state.withLockedValue { sessions in
                sessions.nextFresh += 1
                return sessions.nextFresh
            }
        case .acceptsForeignBindTokens:
            guard header.kind == .bind else { return datagram }
        case .boundCarriesARequestID, .twoIdentities, .namesAnotherUser:
            return datagram
        }
        let key = SymmetricKey(data: connected.sessionKey)
        guard var payload = try? DatagramSeal.open(header, sealed: buffer, key: key, direction: .toServer) else { return datagram }
        if rule == .acceptsForeignBindTokens { payload = Array(connected.bindToken) }
        guard let sealed = try? DatagramSeal.seal(resealed, payload: payload, key: key, direction: .toServer) else { return datagram }
        return Array(sealed.readableBytesView)
    }

    /// Closes its sockets; its threads end with them.
    func stop() {
        stopped.withLockedValue { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in state.withLockedValue({ Array($0.upstreams.values) }) + [udp] {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
    }
}

/// A value behind a lock, for the proxy's threads.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    func withLockedValue<T>(_ body: (inout Value) -> T) -> T {
        lock.withLock { body(&value) }
    }
}
