#if os(Linux)
import Foundation
import Glibc
import SIMPTerminal
import Synchronization
import Testing

/// `simp` hears of network changes from rtnetlink (issue 45, item 3: UDP probed at once after
/// a network change). A veth pair with an address, made and deleted by the test, is a
/// change it must hear of.
@Suite struct NetworkChangesTests {
    static let ip = "/usr/sbin/ip"

    final class Count: Sendable {
        let value = Atomic<Int>(0)
    }

    @discardableResult
    static func ip(_ arguments: String...) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ip)
        process.arguments = arguments
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: ip), "needs root and iproute2 to add an interface"))
    func aNewAddressIsAChange() throws {
        let changes = Count()
        let watching = NetworkChanges.watch { changes.value.add(1, ordering: .relaxed) }
        #expect(watching)
        let name = "simpnc\(UInt16.random(in: 0...UInt16.max))"
        #expect(try Self.ip("link", "add", name, "type", "veth", "peer", "name", name + "p") == 0)
        defer { _ = try? Self.ip("link", "del", name) }
        #expect(try Self.ip("addr", "add", "10.254.\(UInt8.random(in: 1...254)).1/32", "dev", name) == 0)
        #expect(try Self.ip("link", "set", name, "up") == 0)
        // Waits for the notice (10 s at most, only when it never comes).
        for _ in 0..<1000 where changes.value.load(ordering: .relaxed) == 0 { usleep(10_000) }
        #expect(changes.value.load(ordering: .relaxed) > 0, "no change heard")
    }
}
#endif
