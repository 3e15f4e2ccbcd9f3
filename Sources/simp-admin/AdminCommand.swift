import ArgumentParser
import Foundation
import SIMPRedis
import SIMPServer

/// Exit statuses: 0 done, 1 failed (Redis unreachable, no node listening, ...), 2 usage,
/// 3 no such user or session.
enum AdminExit {
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let notFound: Int32 = 3
}

@main
enum AdminMain {
    static func main() async {
        do {
            var command = try AdminCommand.parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as AdminError {
            fail(error.description, error.kind == .unknownUser ? AdminExit.notFound : AdminExit.failure)
        } catch let error as RedisError {
            fail("Redis: \(error.message)", AdminExit.failure)
        } catch {
            guard AdminCommand.exitCode(for: error) == .validationFailure else { AdminCommand.exit(withError: error) }
            fail(AdminCommand.fullMessage(for: error), AdminExit.usage)
        }
    }

    static func fail(_ message: String, _ status: Int32) -> Never {
        FileHandle.standardError.write(Data("simp-admin: \(message)\n".utf8))
        exit(status)
    }
}

struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-admin",
        abstract: "Looks after a SIMP deployment through its Redis: sessions, passwords, inboxes.",
        discussion: "Exit status: 0 done, 1 failed, 2 usage error, 3 no such user or session.",
        subcommands: [Sessions.self, Devices.self, Disconnect.self, ResetPassword.self, Inbox.self, KeyPackages.self, MigrateKeys.self])
}

struct AdminOptions: ParsableArguments {
    @Option(help: "Redis URL redis://[[USER]:PASSWORD@]HOST:PORT[/DB], or a Redis Cluster's nodes redis://H1:P1,H2:P2,... (env SIMP_REDIS_URL). Default redis://127.0.0.1:6379.")
    var redis: String?

    @Option(name: .customLong("redis-password-file"),
            help: "File whose content (trailing newline dropped) is the Redis password (env SIMP_REDIS_PASSWORD_FILE). Or set SIMP_REDIS_PASSWORD, or put it in the --redis URL: one of the three.")
    var redisPasswordFile: String?

    @Flag(name: .customLong("redis-cluster"), inversion: .prefixedNo,
          help: "Redis is a Redis Cluster. Default: several nodes are a cluster, one is asked.")
    var redisCluster: Bool?

    @Flag(help: "Print JSON instead of text.")
    var json = false

    /// Runs `body` against Redis and closes the connections whatever happens.
    func with<T>(_ body: (Administration) async throws -> T) async throws -> T {
        let environment = ProcessInfo.processInfo.environment
        let url = redis ?? environment["SIMP_REDIS_URL"] ?? "redis://127.0.0.1:6379"
        let deployment = try await RedisDeployment(urls: url, cluster: redisCluster)
            .withPassword(file: redisPasswordFile ?? environment["SIMP_REDIS_PASSWORD_FILE"], environment: environment["SIMP_REDIS_PASSWORD"])
            .resolved()
        let client = deployment.makeClient()
        do {
            let result = try await body(Administration(redis: client))
            await client.shutdown()
            return result
        } catch {
            await client.shutdown()
            throw error
        }
    }

    func printJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lists online users: every session with a datagram address, its node and address.")

    @OptionGroup var options: AdminOptions

    func run() async throws {
        let sessions = try await options.with { try await $0.sessions() }
        if options.json { return try options.printJSON(sessions) }
        guard !sessions.isEmpty else { return print("no sessions") }
        let rows = sessions.map { [$0.user, $0.device, String($0.session), $0.node + ($0.nodeAlive ? "" : " (gone)"), $0.address, "\($0.expiresInSeconds) s"] }
        print(Table.render(header: ["USER", "DEVICE", "SESSION", "NODE", "ADDRESS", "EXPIRES"], rows: rows))
    }
}

struct Devices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Lists a user's devices: name, online, when last seen, and how far each has confirmed the inbox.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The user.")
    var user: String

    func run() async throws {
        let devices = try await options.with { try await $0.devices(of: user) }
        if options.json {
            return try options.printJSON(devices.map { DeviceRow(name: $0.name, online: $0.online, lastSeen: $0.lastSeen, confirmedSeq: $0.confirmedSeq) })
        }
        guard !devices.isEmpty else { return print("\(user) has no devices") }
        let rows = devices.map { [$0.name, $0.online ? "online" : "offline", DeviceRow.describe(millis: $0.lastSeen), String($0.confirmedSeq)] }
        print(Table.render(header: ["DEVICE", "STATE", "LAST SEEN", "CONFIRMED"], rows: rows))
    }
}

/// One device as JSON: `lastSeen` in ms since the epoch.
struct DeviceRow: Encodable {
    var name: String
    var online: Bool
    var lastSeen: Int64
    var confirmedSeq: UInt64

    static func describe(millis: Int64) -> String {
        guard millis > 0 else { return "never" }
        return ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }
}

struct Disconnect: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Closes a user's session; its client is told not to reconnect.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The user.")
    var user: String

    @Option(help: "Only this session id (see `simp-admin sessions`).")
    var session: UInt64?

    func run() async throws {
        let outcome = try await options.with { try await $0.disconnect(user: user, session: session) }
        switch outcome {
        case .closed(let closed):
            if options.json { return try options.printJSON(["closed": closed]) }
            for session in closed { print("closed session \(session.session) of \(session.user)'s device \(session.device) on node \(session.node)") }
        case .notOnline(let nodes):
            AdminMain.fail("\(user) has no session online (asked \(nodes) node\(nodes == 1 ? "" : "s") to close any anyway)",
                           AdminExit.notFound)
        }
    }
}

struct ResetPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-password",
        abstract: "Sets a new password: older login tokens stop working and the user's session is closed.",
        discussion: "Without --password-stdin a random password is made and printed.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The user.")
    var user: String

    @Flag(name: .customLong("password-stdin"), help: "Read the new password from the first line of stdin.")
    var passwordFromStdin = false

    func run() async throws {
        let generated = !passwordFromStdin
        let password = generated ? Self.randomPassword() : (readLine(strippingNewline: true) ?? "")
        try await options.with { try await $0.resetPassword(user: user, to: password) }
        if options.json { return try options.printJSON(generated ? ["user": user, "password": password] : ["user": user]) }
        print(generated ? "new password for \(user): \(password)" : "password of \(user) reset")
    }

    /// 20 characters of a-z 0-9: about 103 bits.
    static func randomPassword() -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var rng = SystemRandomNumberGenerator()
        return String((0..<20).map { _ in alphabet.randomElement(using: &rng)! })
    }
}

struct KeyPackages: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keypackages",
        abstract: "Shows a user's key directory: the identity, and per device its certificate and KeyPackage pool.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The user.")
    var user: String

    func run() async throws {
        let report = try await options.with { try await $0.keyPackages(of: user) }
        if options.json { return try options.printJSON(report) }
        print(report.identity ? "\(user): identity published \(DeviceRow.describe(millis: report.identitySinceMillis))"
                              : "\(user): no identity published")
        guard !report.devices.isEmpty else { return print("no device certificates or KeyPackages") }
        let rows = report.devices.map { [$0.device, $0.certified ? "yes" : "no", String($0.oneTime), $0.lastResort ? "yes" : "no"] }
        print(Table.render(header: ["DEVICE", "CERTIFIED", "ONE-TIME", "LAST RESORT"], rows: rows))
    }
}

struct Inbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Shows a user's inbox depth (messages not confirmed yet), or with --top the deepest inboxes.")

    @OptionGroup var options: AdminOptions

    @Argument(help: "The user.")
    var user: String?

    @Option(help: "Show the N deepest inboxes instead.")
    var top: Int?

    func validate() throws {
        guard (user == nil) != (top == nil) else { throw ValidationError("give a user or --top N") }
        if let top, top < 1 { throw ValidationError("--top must be at least 1") }
    }

    func run() async throws {
        let depths = try await options.with { admin in
            if let user { return [try await admin.inbox(of: user)] }
            return try await admin.deepestInboxes(top: top ?? 10)
        }
        if options.json { return try user == nil ? options.printJSON(depths) : options.printJSON(depths[0]) }
        guard !depths.isEmpty else { return print("no unconfirmed messages") }
        let rows = depths.map { depth in
            [depth.user, String(depth.unconfirmed), String(depth.lastSeq), String(depth.confirmedSeq),
             depth.oldestSeq.map { "seq \($0) from \(depth.oldestFrom ?? "?")\(Self.age(depth.oldestSentAtMillis))" } ?? "-"]
        }
        print(Table.render(header: ["USER", "UNCONFIRMED", "LAST SEQ", "CONFIRMED", "OLDEST"], rows: rows))
    }

    /// ", 3 min ago", by the sender's clock.
    static func age(_ sentAtMillis: Int64?) -> String {
        guard let sentAtMillis, sentAtMillis > 0 else { return "" }
        let seconds = max(0, Int64(Date().timeIntervalSince1970) - sentAtMillis / 1000)
        switch seconds {
        case ..<120: return ", \(seconds) s ago"
        case ..<7200: return ", \(seconds / 60) min ago"
        default: return ", \(seconds / 3600) h ago"
        }
    }
}

struct MigrateKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate-keys",
        abstract: "Moves data written by a SIMP from before 2026-11-23 to the keys a Redis Cluster needs (simp:inbox:bob -> simp:{bob}:inbox).",
        discussion: "Run it once against the single Redis, with every simp-server stopped.")

    @OptionGroup var options: AdminOptions

    func run() async throws {
        let result = try await options.with { try await $0.migrateKeys() }
        if options.json { return try options.printJSON(result) }
        print("renamed \(result.renamed) keys, split \(result.historiesSplit) conversation histories, dropped \(result.dropped) failed-login counters")
        guard result.conflicts.isEmpty else {
            AdminMain.fail("left \(result.conflicts.count) old keys whose new name exists already: \(result.conflicts.prefix(10).joined(separator: ", "))",
                           AdminExit.failure)
        }
    }
}

/// Columns padded to their widest cell.
enum Table {
    static func render(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { column, cell in
                column == row.count - 1 ? cell : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
