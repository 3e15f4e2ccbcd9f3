import Crypto
import Foundation
import NIOCore
import SIMPCore
#if canImport(Glibc)
import Glibc
#endif

/// A hand-driven client over blocking sockets, for what the library would never send:
/// split and garbage frames, forged fields.
public final class RawPeer {
    public private(set) var tcp: Int32
    public let udp: Int32
    public var parser = FrameParser()
    public var session: Simp_ConnectResponse?
    /// When set, seal with this key instead of the session's (a forger's key).
    public var sealKey: SymmetricKey?
    public private(set) var lastSent: [UInt8] = []
    /// 0 until `connectAndBind` learns it, when the peer was made without it.
    public private(set) var serverUDPPort: Int
    /// The server's IPv4 address.
    public let host: String

    /// `receiveBuffer` fixes the TCP receive buffer before connecting (no autotuning), for a
    /// peer that should hold as little of the server's output as possible. `source` is a
    /// loopback address (127.0.0.2, ...) for the control connection to come from.
    public init(tcpPort: Int, udpPort: Int, receiveBuffer: Int32? = nil, source: String? = nil, host: String = "127.0.0.1") throws {
        self.host = host
        tcp = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        udp = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        serverUDPPort = udpPort
        setReadTimeout(seconds: 15)
        if var size = receiveBuffer {
            setsockopt(tcp, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source {
            var local = Self.loopback(0)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(tcp, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else { throw TestSupportError("cannot bind to \(source)") }
        }
        var addr = Self.address(host, tcpPort)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(tcp, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { throw TestSupportError("cannot connect to \(host):\(tcpPort)") }
    }

    /// How long `read()` waits for the server before it answers nil (15 s unless set).
    public func setReadTimeout(seconds: Int) {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(tcp, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Closes the control connection once; the descriptor number is forgotten so that deinit
    /// cannot close it a second time after the process reused it (for a NIO socket, say).
    public func closeControl() {
        guard tcp >= 0 else { return }
        close(tcp)
        tcp = -1
    }

    deinit {
        closeControl()
        close(udp)
    }

    public static func loopback(_ port: Int) -> sockaddr_in {
        address("127.0.0.1", port)
    }

    public static func address(_ host: String, _ port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(host)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        return addr
    }

    public func writeRaw(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { send(tcp, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    public func frame(_ envelope: Simp_Envelope) -> [UInt8] {
        Array(Frame.encode(envelope).readableBytesView)
    }

    /// The next envelope, nil when the server closed the connection or 15 s passed.
    public func read() throws -> Simp_Envelope? {
        while true {
            if let envelope = try parser.next() { return envelope }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(tcp, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            parser.append(contentsOf: chunk.prefix(n))
        }
    }

    /// Reads until an envelope with this request id (skipping pushes such as pings).
    public func response(to id: UInt64) throws -> Simp_Envelope? {
        while let envelope = try read() {
            if envelope.requestID == id { return envelope }
        }
        return nil
    }

    /// True when the server closed the connection (EOF) rather than going silent.
    public func isClosedByServer() -> Bool {
        var byte: UInt8 = 0
        return recv(tcp, &byte, 1, 0) == 0
    }

    /// Sends a request and reads until its answer (nil: the server closed or went silent).
    public func request(_ id: UInt64, _ body: Simp_Envelope.OneOf_Body) throws -> Simp_Envelope? {
        writeRaw(frame(Simp_Envelope(requestID: id, body)))
        return try response(to: id)
    }

    /// `device`: the one the token is for (empty: "default").
    public func login(_ user: String, _ password: String, device: String = "") throws -> String {
        var login = Simp_LoginRequest()
        login.user = user
        login.password = password
        login.device = device
        writeRaw(frame(Simp_Envelope(requestID: 1, .login(login))))
        let reply = try response(to: 1)
        guard case .loginOk(let ok)? = reply?.body else { throw TestSupportError("login refused: \(String(describing: reply))") }
        return ok.token
    }

    public func connectAndBind(token: String, bundles: Bool = false, device: String = "") throws {
        var connect = Simp_ConnectRequest()
        connect.token = token
        connect.bundles = bundles
        connect.device = device
        writeRaw(frame(Simp_Envelope(requestID: 2, .connect(connect))))
        guard case .connected(let response)? = try response(to: 2)?.body else { throw TestSupportError("connect refused") }
        session = response
        if serverUDPPort == 0 { serverUDPPort = Int(response.udpPort) }
        sendDatagram(.bind, Array(response.bindToken))
        while let envelope = try read() {
            if case .bound = envelope.body { return }
        }
        throw TestSupportError("never bound")
    }

    private var nextPacket: UInt64 = 1

    /// The server's UDP port, as its `connected` said (for a peer that connects by hand).
    public func useServerUDPPort(_ port: Int) {
        serverUDPPort = port
    }

    /// Starts numbering at `number` (a second socket using the same session must not repeat numbers).
    public func skipPacketNumbers(to number: UInt64) {
        nextPacket = number
    }

    /// Seals and sends; each datagram gets the next packet number (the server drops repeats).
    public func sendDatagram(_ kind: DatagramKind, _ payload: [UInt8]) {
        let header = DatagramHeader(kind: kind, sessionID: session?.sessionID ?? 0, packetNumber: nextPacket)
        nextPacket += 1
        let key = sealKey ?? SymmetricKey(data: session?.sessionKey ?? Data(count: 32))
        let bytes = Array(try! DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer).readableBytesView)
        sendRaw(bytes)
    }

    /// The next datagram from the server, opened under the session key; nil after `seconds` of silence.
    public func receiveDatagram(seconds: Int = 5) throws -> (header: DatagramHeader, payload: [UInt8])? {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(udp, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes = [UInt8](repeating: 0, count: Datagram.maxSize)
        let n = bytes.withUnsafeMutableBytes { recv(udp, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        var buffer = ByteBuffer(bytes: bytes.prefix(n))
        let header = try Datagram.decodeHeader(&buffer)
        let key = SymmetricKey(data: session?.sessionKey ?? Data(count: 32))
        return (header, try DatagramSeal.open(header, sealed: buffer, key: key, direction: .toClient))
    }

    /// Reads control frames until one `failed` and one `accepted` came (or the connection
    /// went quiet): the answers to a refused message and to the one sent after it.
    public func readFailedAndAccepted() throws -> (failed: Simp_Failed?, accepted: Simp_Accepted?) {
        var failed: Simp_Failed?
        var accepted: Simp_Accepted?
        while failed == nil || accepted == nil, let envelope = try read() {
            if case .failed(let f) = envelope.body { failed = f }
            if case .accepted(let a) = envelope.body { accepted = a }
        }
        return (failed, accepted)
    }

    /// Sends bytes exactly as given (to replay or tamper with a captured datagram).
    public func sendRaw(_ bytes: [UInt8]) {
        var addr = Self.address(host, serverUDPPort)
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { to in
                bytes.withUnsafeBytes { sendto(udp, $0.baseAddress, $0.count, 0, to, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        lastSent = bytes
    }
}

/// Writes bytes to a peer on a thread of its own (the server may stop reading, and a
/// blocking send must not hold a thread of the caller's cooperative pool), once or, with
/// `repeating`, over and over until `stop()`.
public final class FrameFlood: @unchecked Sendable {
    private let peer: RawPeer
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false
    private var total = 0
    public private(set) var closedByServer = false
    /// Bytes the peer's connection took so far.
    public var written: Int { lock.withLock { total } }

    public init(_ peer: RawPeer, _ bytes: [UInt8], repeating: Bool = false) {
        self.peer = peer
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(peer.tcp, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let fd = peer.tcp
        Thread { [self] in
            var offset = 0
            while offset < bytes.count, !lock.withLock({ stopped }) {
                let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n > 0 {
                    offset += n
                    lock.withLock { total += n }
                } else if errno != EAGAIN && errno != EWOULDBLOCK {
                    closedByServer = true
                    break
                }
                if repeating && offset == bytes.count { offset = 0 }
            }
            done.signal()
        }.start()
    }

    public func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }
}

/// The code of an error frame; nil for anything else (an answer, or nothing).
public func errorCode(_ envelope: Simp_Envelope?) -> Simp_ErrorCode? {
    if case .error(let error)? = envelope?.body { return error.code }
    return nil
}

extension RawPeer {
    /// Sets each user's `group-adds` (password `pw-USER`), over a login of its own with no
    /// session (no device is registered), so a group create or add puts them in at once.
    public static func setGroupAdds(_ users: [String], _ value: String = "everyone", tcpPort: Int, udpPort: Int) throws {
        for user in users {
            let peer = try RawPeer(tcpPort: tcpPort, udpPort: udpPort)
            defer { peer.closeControl() }
            _ = try peer.login(user, "pw-\(user)")
            let answer = try peer.request(2, .settingsRequest(.with { $0.set = [.with { $0.name = "group-adds"; $0.value = value }] }))
            guard case .settingsAnswer? = answer?.body else { throw TestSupportError("group-adds for \(user): \(String(describing: answer))") }
        }
    }
}
