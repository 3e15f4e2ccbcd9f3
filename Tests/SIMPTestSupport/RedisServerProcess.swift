import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A real `redis-server` on a free loopback port, with its data in a temporary directory.
/// AOF is on, so a restart keeps what was written.
public final class RedisServerProcess: @unchecked Sendable {
    public let port: Int
    public let directory: URL
    /// What AUTH takes for this Redis (`[password]` or `[user, password]`); empty: no AUTH.
    public let auth: [String]
    private let extraArguments: [String]
    private var process: ChildProcess?

    /// `password` alone: `requirepass`. With `aclUser`: that ACL user has the password and
    /// `aclRules` (every key, channel and command by default), and the `default` user is off,
    /// so a connection that does not log in as that user can do nothing. `extraArguments` go
    /// to redis-server as they are.
    public init(extraArguments: [String] = [], password: String? = nil, aclUser: String? = nil,
                aclRules: [String] = ["~*", "&*", "+@all"]) throws {
        port = try freeTCPPort()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-redis-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var arguments = extraArguments
        switch (aclUser, password) {
        case (let user?, let password?):
            arguments += ["--user", "default", "off", "--user", user, "on", ">\(password)"] + aclRules
            auth = [user, password]
        case (nil, let password?):
            arguments += ["--requirepass", password]
            auth = [password]
        case (_?, nil):
            throw TestSupportError("an ACL user needs a password")
        case (nil, nil):
            auth = []
        }
        self.extraArguments = arguments
        try start()
    }

    public var url: String { "redis://127.0.0.1:\(port)" }

    /// The running redis-server's process id; nil while stopped.
    public var pid: pid_t? { process?.pid }

    /// `url` with this Redis' user and password in it (percent-encoded).
    public var urlWithCredentials: String {
        switch auth.count {
        case 1: "redis://:\(percentEncoded(auth[0]))@127.0.0.1:\(port)"
        case 2: "redis://\(percentEncoded(auth[0])):\(percentEncoded(auth[1]))@127.0.0.1:\(port)"
        default: url
        }
    }

    public func start() throws {
        let redis = try findExecutable("redis-server").path
        process = try ChildProcess(redis, ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                                           "--appendfsync", "always", "--dir", directory.path, "--daemonize", "no"] + extraArguments)
        try waitUntilListening(port: port, timeout: 10)
        try waitUntilPong(port: port, timeout: 10, auth: auth)
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
        let reply = redisReply(port: port, arguments, auth: auth)
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
/// `auth`: AUTH's arguments, sent first when not empty.
public func waitUntilPong(port: Int, timeout: TimeInterval, auth: [String] = []) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if pingReply(port: port, auth: auth).hasPrefix("+PONG") { return }
        usleep(20_000)
    }
    throw TestSupportError("redis on port \(port) not ready after \(timeout)s")
}

func pingReply(port: Int, auth: [String] = []) -> String {
    redisReply(port: port, ["PING"], auth: auth)
}

/// RFC 3986's unreserved characters as they are, every other byte as %XX.
public func percentEncoded(_ text: String) -> String {
    text.utf8.map { byte in
        let unreserved = (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || [0x2D, 0x2E, 0x5F, 0x7E].contains(byte)
        return unreserved ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
    }.joined()
}

/// The first bytes of Redis' answer to one command on a fresh connection; "" if unreachable.
/// With `auth`, AUTH goes first on that connection, and its answer must be OK.
public func redisReply(port: Int, _ arguments: [String], auth: [String] = []) -> String {
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
    var buffer = [UInt8](repeating: 0, count: 4096)
    func request(_ arguments: [String]) {
        var request = "*\(arguments.count)\r\n"
        for argument in arguments { request += "$\(argument.utf8.count)\r\n\(argument)\r\n" }
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }
    if !auth.isEmpty {
        request(["AUTH"] + auth)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return "" }
        let answer = String(decoding: buffer.prefix(n), as: UTF8.self)
        guard answer.hasPrefix("+OK") else { return answer }
    }
    request(arguments)
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
