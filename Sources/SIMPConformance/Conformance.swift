import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SIMPCore
import SIMPTestSupport

/// One numbered check of docs/PROTOCOL.md against a running server: what the section says,
/// tried on the wire with a hand-driven peer (`RawPeer`), never through SIMP's own client.
public struct ConformanceCheck: Sendable {
    /// "SECTION.N", e.g. "2.3".
    public let id: String
    /// The section of docs/PROTOCOL.md it tests.
    public let section: String
    public let title: String
    let run: @Sendable (ConformanceTarget) throws -> Void
    /// Whether this is the check `id`, or one of the section `id` names ("4" or "4." holds 4.10, "4.1" does not).
    public func isIn(_ id: String) -> Bool {
        self.id == id || self.id.hasPrefix(id.hasSuffix(".") ? id : id + ".")
    }

    /// The id's numbers, for running and printing the checks in the document's order.
    var rank: [Int] { id.split(separator: ".").compactMap { Int($0) } }

    init(_ id: String, _ section: String, _ title: String, run: @escaping @Sendable (ConformanceTarget) throws -> Void) {
        self.id = id
        self.section = section
        self.title = title
        self.run = run
    }
}

/// Why a check failed, as the check saw it.
public struct ConformanceFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The server under test: where it listens, and what a run learned of it. A run registers
/// accounts of its own, each once (a server allows few registrations per address an hour), and
/// each check logs them in on connections of its own.
public struct ConformanceTarget: Sendable {
    public var host: String
    public var port: Int
    private let accounts = Accounts()
    private let learned: Learned

    /// `endToEnd`: what the server is to require, where a check's subject is plaintext; nil
    /// (the tool's way): learned from the server (`endToEnd()`).
    public init(host: String, port: Int, endToEnd: EndToEnd? = nil) {
        self.host = host
        self.port = port
        learned = Learned(endToEnd: endToEnd)
    }

    /// The IPv4 address of `host` (a name, or an address already), nil when it has none.
    public static func ipv4(of host: String) -> String? {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &found) == 0, let first = found else { return nil }
        defer { freeaddrinfo(found) }
        guard let address = first.pointee.ai_addr else { return nil }
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet4 in
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            var raw = inet4.pointee.sin_addr
            guard inet_ntop(AF_INET, &raw, &text, socklen_t(INET_ADDRSTRLEN)) != nil else { return nil }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// The run's accounts, registered on first use.
    final class Accounts: @unchecked Sendable {
        private let lock = NSLock()
        private var users: [String: (user: String, password: String)] = [:]

        func account(_ slot: String, register: (String) throws -> (user: String, password: String)) throws -> (user: String, password: String) {
            try lock.withLock {
                if let known = users[slot] { return known }
                let made = try register(slot)
                users[slot] = made
                return made
            }
        }
    }

    /// Whether the server takes plaintext messages besides sealed ones (docs/PROTOCOL.md, Sealed
    /// messages): SIMP's server's `--e2e` setting, `required` by default.
    public enum EndToEnd: String, Sendable {
        /// Plaintext messages, read marks and typing are taken, as are sealed ones.
        case optional
        /// Only sealed ones: a plaintext message is `failed{E2E_REQUIRED}`, a `markRead` naming a
        /// mark is `E2E_REQUIRED`, a plain TYPING is dropped.
        case required
    }

    /// What the run learned of the server, once.
    final class Learned: @unchecked Sendable {
        private let lock = NSLock()
        private var endToEnd: EndToEnd?

        init(endToEnd: EndToEnd?) {
            self.endToEnd = endToEnd
        }

        func endToEnd(probe: () throws -> EndToEnd) throws -> EndToEnd {
            try lock.withLock {
                if let endToEnd { return endToEnd }
                let found = try probe()
                endToEnd = found
                return found
            }
        }
    }

    /// Whether the server requires end-to-end encryption, learned once a run from how it answers
    /// a plaintext message between the run's accounts: `accepted` is `optional`,
    /// `failed{E2E_REQUIRED}` `required`. The checks whose subject is plaintext (a plain TYPING,
    /// `markRead`, a plaintext message) then expect what the document says of that mode.
    public func endToEnd() throws -> EndToEnd {
        try learned.endToEnd(probe: probeEndToEnd)
    }

    /// Sent from a device of its own ("probe"): a check's session of the account's default
    /// device, open while it asks, is not replaced.
    private func probeEndToEnd() throws -> EndToEnd {
        let (peer, _) = try boundPeer("a", device: "probe")
        let recipient = try account("b").user
        peer.sendDatagram(.data, try Conformance.message(id: "e2e-probe", to: recipient, order: 1, type: .text, content: "plaintext"))
        let answer = try peer.answers(until: "e2e-probe").last
        switch answer?.kind {
        case "accepted": return .optional
        case "failed e2e_required": return .required
        default: throw ConformanceFailure("a plaintext message was answered \(String(describing: answer)): neither accepted (--e2e optional) nor failed E2E_REQUIRED (--e2e required)")
        }
    }

    /// The run's account in `slot` ("a" or "b"): registered once, then reused.
    public func account(_ slot: String) throws -> (user: String, password: String) {
        try accounts.account(slot) { try newUser($0) }
    }

    /// A fresh control connection (its UDP socket learns the port at `connected`).
    public func peer() throws -> RawPeer {
        try RawPeer(tcpPort: port, udpPort: 0, host: host)
    }

    /// Registers a new user with a random name; returns its name and password.
    public func newUser(_ prefix: String = "c") throws -> (user: String, password: String) {
        let user = prefix + String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let password = "pw-" + user
        let peer = try peer()
        let reply = try peer.request(1, .register(.with { $0.user = user; $0.password = password }))
        guard case .ok? = reply?.body else { throw ConformanceFailure("register \(user): \(describe(reply))") }
        return (user, password)
    }

    /// The run's account in `slot`, logged in and connected on a new connection, not bound.
    public func connectedPeer(_ slot: String, device: String = "") throws -> (peer: RawPeer, connected: Simp_ConnectResponse) {
        let (user, password) = try account(slot)
        let peer = try peer()
        let token = try peer.login(user, password, device: device)
        guard case .connected(let connected)? = try peer.request(2, .connect(.with { $0.token = token; $0.device = device }))?.body else {
            throw ConformanceFailure("connect refused")
        }
        peer.session = connected
        peer.useServerUDPPort(Int(connected.udpPort))
        return (peer, connected)
    }

    /// The run's account in `slot`, logged in, connected and bound on a new connection (a
    /// session of it on another connection is replaced).
    public func boundPeer(_ slot: String, device: String = "") throws -> (peer: RawPeer, user: String) {
        let (peer, connected) = try connectedPeer(slot, device: device)
        peer.sendDatagram(.bind, Array(connected.bindToken))
        while let envelope = try peer.read() {
            if case .bound = envelope.body { return (peer, connected.user) }
        }
        throw ConformanceFailure("never bound")
    }
}

/// What one check came to.
public struct ConformanceResult: Sendable, Codable {
    public var id: String
    public var section: String
    public var title: String
    public var passed: Bool
    /// Why it failed (empty when it passed).
    public var detail: String
}

public enum Conformance {
    /// Runs the checks in order; each on connections of its own.
    public static func run(_ target: ConformanceTarget, checks: [ConformanceCheck] = all,
                           progress: (ConformanceResult) -> Void = { _ in }) -> [ConformanceResult] {
        checks.map { check in
            var result = ConformanceResult(id: check.id, section: check.section, title: check.title, passed: true, detail: "")
            do {
                try check.run(target)
            } catch {
                result.passed = false
                result.detail = "\(error)"
            }
            progress(result)
            return result
        }
    }
}

func describe(_ envelope: Simp_Envelope?) -> String {
    guard let envelope else { return "no answer (the connection closed or stayed silent 15 s)" }
    return (try? envelope.jsonString()) ?? "\(envelope)"
}

func expect(_ condition: Bool, _ failure: @autoclosure () -> String) throws {
    guard condition else { throw ConformanceFailure(failure()) }
}

