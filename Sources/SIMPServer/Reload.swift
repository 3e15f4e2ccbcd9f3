import NIOCore
import NIOSSL

/// The TLS context new connections get, and the certificates it was made from (to tell an
/// operator whether a reload changed them).
struct LiveTLS: Sendable {
    let context: NIOSSLContext
    let chain: [NIOSSLCertificate]

    /// The leaf certificate's serial number in hex, for the log.
    var serial: String {
        let bytes = chain.first?.serialNumber ?? []
        return bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// Everything a new control connection is built from that a reload may change.
struct LiveSettings: Sendable {
    /// Shared by every connection made with these settings: each handler holds a reference,
    /// not a copy, since it is kept for every session.
    let control: SharedControlContext
    var limits: ServerLimits
    var tls: LiveTLS?

    init(control: ControlContext, limits: ServerLimits, tls: LiveTLS?) {
        var control = control
        control.requests = .init(rate: limits.requestsPerSecond, burst: limits.requestBurst,
                                 maxOutstanding: limits.requestsInProgress)
        control.loginDeadline = limits.loginDeadline
        control.unreadGrace = limits.unreadGrace
        self.control = SharedControlContext(control)
        self.limits = limits
        self.tls = tls
    }
}

/// What a reload changed, for its log line.
public struct ReloadOutcome: Sendable {
    /// The new leaf certificate's serial number when it differs from the old one.
    public var newCertificate: String?
}

public struct ReloadError: Error, CustomStringConvertible {
    public let description: String
}

extension SIMPServer {
    /// Applies what can change without a restart: the TLS certificate and key, read again from
    /// their files, and the limits `ServerLimits.reloading(from:)` takes. Connections already open keep their TLS session and
    /// their per-connection limits. `build` makes the new configuration (the command reads its
    /// sources again); if it or the certificate fails, nothing changes and the error is thrown.
    /// Every call counts in `simp_config_reloads_total{result}`.
    public func reload(_ build: () throws -> ServerConfiguration) throws -> ReloadOutcome {
        do {
            let outcome = try apply(try build())
            metrics.configReloaded(ok: true)
            return outcome
        } catch {
            metrics.configReloaded(ok: false)
            throw error
        }
    }

    private func apply(_ new: ServerConfiguration) throws -> ReloadOutcome {
        guard let current = live.withLockedValue({ $0 }) else { throw ReloadError(description: "the server has not started") }
        guard (new.tls == nil) == (current.tls == nil) else {
            throw ReloadError(description: "TLS cannot be turned on or off by a reload; restart the server")
        }
        let tls = try new.tls.map(Self.makeTLS)
        let limits = current.limits.reloading(from: new.limits)
        current.control.admission.update(limits)
        store?.bounds = .init(limit: new.inboxLimit, share: new.inboxShare)
        if let router {
            let (rate, burst, share) = (new.limits.messagesPerSecond, new.limits.messageBurst, min(new.inboxShare, new.inboxLimit))
            router.loop.execute { router.reload(messagesPerSecond: rate, burst: burst, inboxShare: share) }
        }
        live.withLockedValue { $0 = LiveSettings(control: current.control.value, limits: limits, tls: tls) }
        let changed = tls.map { $0.chain != current.tls?.chain } ?? false
        return ReloadOutcome(newCertificate: changed ? tls?.serial : nil)
    }
}

extension ServerLimits {
    /// These limits with the ones a reload may change taken from `new`: per source IP and per
    /// user (at once), per connection (for connections opened after the reload), and the data
    /// rate of sessions opened after it. Registrations and password hashing are fixed at
    /// start, because the accounts hold them. (The inbox limits are the store's: `apply`.)
    public func reloading(from new: ServerLimits) -> ServerLimits {
        var limits = self
        limits.connectionsPerIP = new.connectionsPerIP
        limits.sessionsPerUser = new.sessionsPerUser
        limits.userRequestsPerSecond = new.userRequestsPerSecond
        limits.userRequestBurst = new.userRequestBurst
        limits.requestsPerSecond = new.requestsPerSecond
        limits.requestBurst = new.requestBurst
        limits.frameDeadline = new.frameDeadline
        limits.loginDeadline = new.loginDeadline
        limits.unreadGrace = new.unreadGrace
        limits.messagesPerSecond = new.messagesPerSecond
        limits.messageBurst = new.messageBurst
        return limits
    }
}
