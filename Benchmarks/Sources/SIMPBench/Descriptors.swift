#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The open-file limit, checked before thousands of clients are connected: running out half
/// way shows up as obscure connect errors.
public enum Descriptors {
    /// Kept free for what is not a client: event loops, listeners, pipes to the spawned
    /// processes, and the short-lived connections that register users (32 at a time).
    static let margin = 100

    /// A SIMP client holds a TCP control connection and a UDP socket; an MQTT user one
    /// connection, and the two systems run one after the other.
    public static func needed(clients: Int) -> Int { 2 * clients + margin }

    /// The clients this process can hold once its soft limit is raised to the hard one.
    public static func maxClients() -> Int { max(0, (raiseLimit() - margin) / 2) }

    /// Raises the soft limit of open files to the hard limit (children started later inherit
    /// it), and returns the soft limit then in force.
    @discardableResult
    public static func raiseLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        // Unlimited (RLIM_INFINITY, all ones) clamps to Int.max.
        return Int(clamping: limit.rlim_cur)
    }

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
