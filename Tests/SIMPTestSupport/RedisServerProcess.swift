import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` on a free loopback port, with its data in a temporary directory.
/// AOF is on, so a restart keeps what was written.
public final class RedisServerProcess: @unchecked Sendable {
    public let port: Int
    public let directory: URL
    private var process: ChildProcess?

    public init() throws {
        port = try freeTCPPort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try start()
    }

    public var url: String { "redis://127.0.0.1:\(port)" }

    public func start() throws {
        let redis = try findExecutable("redis-server").path
        process = try ChildProcess(redis, ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                                           "--appendfsync", "always", "--dir", directory.path, "--daemonize", "no"])
        try waitUntilListening(port: port, timeout: 10)
        try waitUntilPong(port: port, timeout: 10)
    }

    /// SIGTERM and wait: Redis flushes its AOF on the way out.
    public func stop() {
        guard let p = process else { return }
        p.signal(SIGTERM)
        if p.waitForExit(timeout: 10) == nil { p.signal(SIGKILL); _ = p.waitForExit(timeout: 5) }
        process = nil
    }

    /// SIGKILL: no chance to flush anything beyond what appendfsync already wrote.
    public func kill9() {
        guard let p = process else { return }
        p.signal(SIGKILL)
        _ = p.waitForExit(timeout: 5)
        process = nil
    }

    public func restart() throws {
        stop()
        try start()
    }

    /// The AOF file that takes new writes (Redis 7 keeps `appendonlydir/*.incr.aof`).
    public func writeLog() throws -> URL {
        let folder = directory.appendingPathComponent("appendonlydir")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".incr.aof") }.sorted()
        guard let newest = names.last else { throw TestSupportError("no incremental AOF in \(folder.path)") }
        return folder.appendingPathComponent(newest)
    }

    /// How many bytes the AOF has written so far (every write is whole once answered, with
    /// `appendfsync always`).
    public func writeLogSize() throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: try writeLog().path)
        return (attributes[.size] as? Int) ?? 0
    }

    /// Cuts the AOF of a stopped Redis back to `size` bytes: it starts again without the writes
    /// made after that point, as Redis does after losing the tail of an `everysec` AOF.
    public func dropWrites(after size: Int) throws {
        precondition(process == nil, "stop Redis before cutting its AOF")
        let handle = try FileHandle(forWritingTo: try writeLog())
        try handle.truncate(atOffset: UInt64(size))
        try handle.close()
    }

    /// One command over a fresh connection (RESP), for checking what Redis holds.
    public func command(_ arguments: [String]) throws -> String {
        let reply = redisReply(port: port, arguments)
        guard !reply.isEmpty else { throw TestSupportError("no answer from Redis on \(port) to \(arguments)") }
        return reply
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A port that was free a moment ago (bound to 0 and released).
public func freeTCPPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw TestSupportError("socket() failed") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { ptr -> Int32 in
            guard bind(fd, ptr, len) == 0 else { return -1 }
            return getsockname(fd, ptr, &len)
        }
    }
    guard bound == 0 else { throw TestSupportError("bind() failed") }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Polls until something accepts TCP connections on the port.
public func waitUntilListening(port: Int, timeout: TimeInterval) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if canConnect(port: port) { return }
        usleep(20_000)
    }
    throw TestSupportError("nothing listening on 127.0.0.1:\(port) after \(timeout)s")
}

/// Polls until Redis answers PING with PONG (not LOADING): accepting connections is not enough.
public func waitUntilPong(port: Int, timeout: TimeInterval) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if pingReply(port: port).hasPrefix("+PONG") { return }
        usleep(20_000)
    }
    throw TestSupportError("redis on port \(port) not ready after \(timeout)s")
}

func pingReply(port: Int) -> String {
    redisReply(port: port, ["PING"])
}

/// The first bytes of Redis' answer to one command on a fresh connection; "" if unreachable.
func redisReply(port: Int, _ arguments: [String]) -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return "" }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    let connected = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else { return "" }
    var request = "*\(arguments.count)\r\n"
    for argument in arguments { request += "$\(argument.utf8.count)\r\n\(argument)\r\n" }
    let bytes = Array(request.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    guard n > 0 else { return "" }
    var received = Array(buffer.prefix(n))
    // A long bulk reply (CLUSTER NODES) may come in several reads: read until it is whole.
    while let missing = bulkBytesMissing(received), missing > 0 {
        let more = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min($0.count, missing), 0) }
        guard more > 0 else { break }
        received += buffer.prefix(more)
    }
    return String(decoding: received, as: UTF8.self)
}

/// How many bytes a `$N` bulk reply still lacks; nil for other replies.
private func bulkBytesMissing(_ received: [UInt8]) -> Int? {
    guard received.first == UInt8(ascii: "$"), let end = received.firstIndex(of: UInt8(ascii: "\r")),
          let length = Int(String(decoding: received[1..<end], as: UTF8.self)), length >= 0 else { return nil }
    return (end + 2 + length + 2) - received.count
}

public func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

public func findExecutable(_ name: String) throws -> URL {
    let paths = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/bin:/usr/sbin:/usr/local/bin"
    for dir in paths.split(separator: ":") {
        let candidate = URL(fileURLWithPath: String(dir)).appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    throw TestSupportError("\(name) not found on PATH; install it (apt-get install -y redis-server)")
}
