#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Starting and stopping the servers a benchmark runs as child processes (Mosquitto here,
/// Redis and simp-server in SIMPBench).
public enum ChildProcesses {
    /// Swift's concurrency and Dispatch threads block SIGTERM and SIGINT, and a child inherits
    /// its spawner's mask: the child would sit out a SIGTERM until the SIGKILL. Spawn with
    /// nothing blocked.
    public static func runWithNoSignalsBlocked(_ process: Process) throws {
        var none = sigset_t()
        var saved = sigset_t()
        sigemptyset(&none)
        pthread_sigmask(SIG_SETMASK, &none, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try process.run()
    }

    /// SIGTERM to all, then SIGKILL to those still running after 4 s; every child is reaped.
    /// (Foundation's waitUntilExit can hang off the main thread.) `reaped` hears of each exit.
    /// Returns the children that needed the SIGKILL.
    @discardableResult
    public static func terminate(_ pids: [Int32], reaped: (Int32) -> Void = { _ in }) async -> [Int32] {
        for pid in pids { kill(pid, SIGTERM) }
        var running = pids
        for _ in 0..<200 where !running.isEmpty {
            running.removeAll { pid in exited(pid, reaped: reaped) }
            if !running.isEmpty { try? await Task.sleep(for: .milliseconds(20)) }
        }
        for pid in running {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
            reaped(pid)
        }
        return running
    }

    /// Reaps the child if it has exited. (Foundation's isRunning can lag far behind, and it
    /// may have reaped the child itself: then waitpid fails, which counts as exited.)
    public static func exited(_ pid: Int32, reaped: (Int32) -> Void = { _ in }) -> Bool {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) != 0 else { return false }
        reaped(pid)
        return true
    }
}
