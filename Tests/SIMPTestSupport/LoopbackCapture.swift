import Foundation
import NIOConcurrencyHelpers
#if canImport(Glibc)
import Glibc
#endif

/// One IPv4 TCP or UDP packet seen on the wire.
public struct CapturedPacket: Sendable {
    public var isTCP: Bool
    public var sourcePort: Int
    public var destinationPort: Int
    public var payload: [UInt8]
}

/// Records what crosses the machine's interfaces (loopback included) to or from some ports,
/// through a raw AF_PACKET socket: what tcpdump would see. Needs root (CAP_NET_RAW).
public final class LoopbackCapture: @unchecked Sendable {
    private let fd: Int32
    private let ports: Set<Int>
    private let state = NIOLockedValueBox((running: true, packets: [CapturedPacket]()))
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)

    public init(ports: Set<Int>) throws {
        self.ports = ports
        let ethPAll = UInt16(0x0003)
        fd = socket(AF_PACKET, Int32(SOCK_RAW.rawValue), Int32(ethPAll.bigEndian))
        guard fd >= 0 else { throw TestSupportError("raw packet socket: \(String(cString: strerror(errno))) (needs root)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer: Int32 = 8 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, socklen_t(MemoryLayout<Int32>.size))
        let thread = Thread { [self] in run() }
        self.thread = thread
        thread.start()
    }

    /// Stops capturing and returns every matching packet, in the order seen: every packet sent
    /// before the call is in (the kernel queued it to this socket as it was sent, and the
    /// capture reads the queue empty before it stops).
    public func stop() -> [CapturedPacket] {
        state.withLockedValue { $0.running = false }
        finished.wait()
        close(fd)
        return state.withLockedValue { $0.packets }
    }

    private func run() {
        var frame = [UInt8](repeating: 0, count: 65_600)
        while true {
            // Once asked to stop, read without waiting until the queue is empty.
            let stopping = !state.withLockedValue { $0.running }
            let n = frame.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, stopping ? Int32(MSG_DONTWAIT) : 0) }
            if n <= 0, stopping { break }
            guard n > 0, let packet = Self.parse(frame[0..<n]),
                  ports.contains(packet.sourcePort) || ports.contains(packet.destinationPort) else { continue }
            state.withLockedValue { $0.packets.append(packet) }
        }
        finished.signal()
    }

    /// Ethernet (loopback uses an all-zero one) / IPv4 / TCP or UDP.
    static func parse(_ frame: ArraySlice<UInt8>) -> CapturedPacket? {
        let bytes = Array(frame)
        let ip = 14
        guard bytes.count > ip + 20, bytes[12] == 0x08, bytes[13] == 0x00, bytes[ip] >> 4 == 4 else { return nil }
        let headerLength = Int(bytes[ip] & 0x0f) * 4
        let totalLength = Int(bytes[ip + 2]) << 8 | Int(bytes[ip + 3])
        let proto = bytes[ip + 9]
        let l4 = ip + headerLength
        let end = min(bytes.count, ip + totalLength)
        guard proto == 6 || proto == 17, end >= l4 + 8 else { return nil }
        let source = Int(bytes[l4]) << 8 | Int(bytes[l4 + 1])
        let destination = Int(bytes[l4 + 2]) << 8 | Int(bytes[l4 + 3])
        let payloadStart = proto == 6 ? l4 + Int(bytes[l4 + 12] >> 4) * 4 : l4 + 8
        guard payloadStart <= end else { return nil }
        return CapturedPacket(isTCP: proto == 6, sourcePort: source, destinationPort: destination,
                              payload: Array(bytes[payloadStart..<end]))
    }
}

extension Array where Element == UInt8 {
    /// True when `needle` occurs somewhere in these bytes.
    public func contains(bytes needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if self[start..<start + needle.count].elementsEqual(needle) { return true }
        }
        return false
    }
}
