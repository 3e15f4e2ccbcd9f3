import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import SIMPServer
import UnixSignals

/// Re-reads the settings on SIGHUP and hands them to the server, which applies the TLS
/// certificate and the limits it can change while running; logs one line saying what changed,
/// and a warning for changed settings that need a restart.
final class Reloader: Sendable {
    /// Settings a reload applies (SIMPServer.reload: the certificate files, and
    /// ServerLimits.reloading(from:)). Any other changed setting is reported as needing a restart.
    static let live: Set<String> = [
        "tls-cert", "tls-key", "max-conns-per-ip", "max-sessions-per-user", "max-user-requests-per-sec",
        "user-request-burst", "max-requests-per-sec", "request-burst", "frame-deadline", "login-deadline", "unread-grace",
        "inbox-limit", "inbox-share", "max-msgs-per-sec", "msg-burst",
    ]

    private let server: SIMPServer
    private let logger: Logger
    private let load: @Sendable () throws -> LoadedSettings
    /// The settings the server runs with, as `--print-config` would list them.
    private let running: NIOLockedValueBox<[SettingsReader.Entry]>

    init(server: SIMPServer, running: [SettingsReader.Entry], logger: Logger, load: @escaping @Sendable () throws -> LoadedSettings) {
        self.server = server
        self.running = NIOLockedValueBox(running)
        self.logger = logger
        self.load = load
    }

    func reload() {
        var loaded: [SettingsReader.Entry] = []
        do {
            let outcome = try server.reload {
                let settings = try load()
                loaded = settings.settings.entries
                return settings.configuration
            }
            report(loaded, newCertificate: outcome.newCertificate)
        } catch {
            logger.error("configuration reload failed, still running with the previous one: \(error)")
        }
    }

    private func report(_ loaded: [SettingsReader.Entry], newCertificate: String?) {
        let before = running.withLockedValue { $0 }
        let old = Dictionary(before.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let changed = loaded.filter { entry in old[entry.name].map { $0.value != entry.value } ?? false }
        let applied = changed.filter { Self.live.contains($0.name) }
        let waiting = changed.filter { !Self.live.contains($0.name) }
        // What runs now: the applied values, and the old ones of what waits for a restart.
        let restartOnly = Set(waiting.map(\.name))
        running.withLockedValue { entries in
            entries = loaded.map { entry in restartOnly.contains(entry.name) ? old[entry.name] ?? entry : entry }
        }
        var parts = applied.map { "\($0.name) \(old[$0.name]?.value ?? "?") -> \($0.value) (\($0.source))" }
        if let newCertificate { parts.append("TLS certificate replaced (serial \(newCertificate))") }
        logger.notice("configuration reloaded: \(parts.isEmpty ? "nothing changed" : parts.joined(separator: ", "))")
        if !waiting.isEmpty {
            let list = waiting.map { "\($0.name) \(old[$0.name]?.value ?? "?") -> \($0.value) (\($0.source))" }
            logger.warning("changed but only applied at the next restart: \(list.joined(separator: ", "))")
        }
    }
}

/// Runs a reload for every SIGHUP until graceful shutdown.
struct ReloadOnHangup: Service {
    let signals: UnixSignalsSequence
    let reloader: Reloader

    func run() async {
        for await _ in signals.cancelOnGracefulShutdown() {
            reloader.reload()
        }
    }
}
