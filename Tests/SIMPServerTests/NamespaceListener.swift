import Foundation
import NIOConcurrencyHelpers
import SIMPTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// A test's namespace as "another machine" that is still this one: an address that is not
/// loopback, programs and threads inside it. Traffic to the address never leaves the
/// namespace, and the machine's own interfaces, addresses and routes are not touched.
extension NetworkNamespace {
    /// Brings the namespace's `lo` up and gives it `address` on a veth pair of its own.
    func addAddress(_ address: String) throws {
        for command in [["link", "set", "lo", "up"],
                        ["link", "add", "simp0", "type", "veth", "peer", "name", "simp1"],
                        ["addr", "add", "\(address)/24", "dev", "simp0"],
                        ["link", "set", "simp0", "up"],
                        ["link", "set", "simp1", "up"]] {
            guard try runCommand("/usr/sbin/ip", ["-n", name] + command) == 0 else {
                throw TestSupportError("ip -n \(name) \(command.joined(separator: " ")) failed")
            }
        }
    }

    /// `executable` started inside the namespace (`ip netns exec`), with the test's environment
    /// and `environment`.
    func spawn(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess("/usr/sbin/ip", ["netns", "exec", name, executable] + arguments, environment: environment)
    }

    /// Moves the calling thread into the namespace `name` for good: the sockets it opens from
    /// then on are in there (an event loop's thread, say). Other threads stay where they are.
    /// Static, by name, so that a closure for another thread captures only the name.
    static func enter(named name: String) throws {
        let path = "/var/run/netns/\(name)"
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TestSupportError("open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        // setns(2) is not in Swift's Glibc module.
        typealias SetNS = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "setns") else { throw TestSupportError("no setns") }
        let cloneNewNet: Int32 = 0x4000_0000
        guard unsafeBitCast(symbol, to: SetNS.self)(fd, cloneNewNet) == 0 else {
            throw TestSupportError("setns \(name): \(String(cString: strerror(errno)))")
        }
    }

    /// Whether the calling thread is inside the namespace `name`.
    static func holdsCurrentThread(_ name: String) -> Bool {
        var mine = stat()
        var its = stat()
        return stat("/proc/thread-self/ns/net", &mine) == 0 && stat("/var/run/netns/\(name)", &its) == 0
            && mine.st_ino == its.st_ino && mine.st_dev == its.st_dev
    }

    /// `body` run on a thread of its own inside the namespace; the caller's thread stays out.
    /// A socket it makes stays in the namespace after the thread is gone.
    func inside<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = NIOLockedValueBox<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let name = name
        let thread = Thread {
            result.withLockedValue { $0 = Result { try NetworkNamespace.enter(named: name); return try body() } }
            done.signal()
        }
        thread.start()
        done.wait()
        return try result.withLockedValue { $0! }.get()
    }
}

/// A plain TCP listener made inside a namespace that never answers: it records what a client
/// sends before any reply. Blocking calls, each with a deadline.
final class RecordingListener: @unchecked Sendable {
    let port: Int
    private let fd: Int32

    init(in namespace: NetworkNamespace, at address: String) throws {
        let (fd, port) = try namespace.inside { () throws -> (Int32, Int) in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw TestSupportError("socket: \(String(cString: strerror(errno)))") }
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            guard inet_pton(AF_INET, address, &local.sin_addr) == 1 else { throw TestSupportError("bad address \(address)") }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else {
                Glibc.close(fd)
                throw TestSupportError("listen on \(address): \(String(cString: strerror(errno)))")
            }
            return (fd, Int(UInt16(bigEndian: local.sin_port)))
        }
        self.fd = fd
        self.port = port
    }

    deinit {
        Glibc.close(fd)
    }

    /// Whether a connection is waiting to be accepted, now (no wait). A client that connected
    /// and exited has left one: the kernel completed its handshake before its connect returned.
    var hasPendingConnection: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }

    /// The next connection, waiting up to `timeout` seconds.
    func accept(timeout: TimeInterval) -> Int32? {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, Int32(timeout * 1000)) == 1 else { return nil }
        let connection = Glibc.accept(fd, nil, nil)
        return connection >= 0 ? connection : nil
    }

    /// What the peer of `connection` sends until `enough` says so; then this side stops
    /// writing (the peer reads end of file, as from a server that hung up) and the rest is read
    /// until the peer closes. Everything it sent, and whether it closed within `timeout` seconds.
    static func read(_ connection: Int32, timeout: TimeInterval, until enough: ([UInt8]) -> Bool) -> (bytes: [UInt8], closed: Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var hungUp = false
        while Date() < deadline {
            if !hungUp, enough(bytes) {
                shutdown(connection, Int32(SHUT_WR))
                hungUp = true
            }
            var entry = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) == 1 else { continue }
            let n = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if n <= 0 { return (bytes, true) }
            bytes += buffer[0..<n]
        }
        return (bytes, false)
    }
}
