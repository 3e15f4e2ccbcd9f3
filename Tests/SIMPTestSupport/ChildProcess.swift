import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process started with posix_spawn and reaped with waitpid. (Foundation's Process
/// can hang in waitUntilExit under the test runner on Linux.) Its stdout and stderr go to
/// files that the test reads; its stdin is a pipe the test writes to.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let stdoutPath: String
    public let stderrPath: String
    private var stdinFD: Int32
    private var exitStatus: Int32?

    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("simp-proc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        stdoutPath = dir.appendingPathComponent("stdout").path
        stderrPath = dir.appendingPathComponent("stderr").path
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw TestSupportError("pipe() failed") }
        stdinFD = fds[1]
        // Later children must not inherit our end, or this child never sees end of input.
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_addclose(&actions, fds[1])
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var env = ProcessInfo.processInfo.environment
        for (k, v) in environment { env[k] = v }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // The test runner's threads block signals; a child must not inherit that, or SIGTERM is ignored.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        close(fds[0])
        guard rc == 0 else {
            close(fds[1])
            throw TestSupportError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        pid = child
    }

    public func write(_ text: String) {
        guard stdinFD >= 0 else { return }
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(stdinFD, $0.baseAddress, $0.count) }
    }

    public func closeStdin() {
        guard stdinFD >= 0 else { return }
        close(stdinFD)
        stdinFD = -1
    }

    public func signal(_ sig: Int32) { kill(pid, sig) }

    /// The exit status (or 128 + signal), nil if still running at the deadline.
    public func waitForExit(timeout: TimeInterval) -> Int32? {
        if let exitStatus { return exitStatus }
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                exitStatus = code
                return code
            }
            usleep(10_000)
        } while Date() < deadline
        return nil
    }

    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Waits until stdout has a line that satisfies `match`; returns it.
    public func waitForLine(timeout: TimeInterval, where match: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let line = stdout.split(separator: "\n").map(String.init).first(where: match) { return line }
            usleep(20_000)
        } while Date() < deadline
        return nil
    }

    deinit {
        if exitStatus == nil {
            kill(pid, SIGKILL)
            _ = waitForExit(timeout: 5)
        }
        closeStdin()
    }
}
