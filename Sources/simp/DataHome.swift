import Foundation
import Synchronization
import SIMPClient

/// $XDG_DATA_HOME/simp (default ~/.local/share/simp): the data directories `simp` keeps without
/// `--data-dir`, one per device (`DIR/DEVICE/USER.sqlite`), so that an encrypting device's keys
/// and MLS state are its own. The REPL and `listen` are the installation's device
/// (`DeviceFile`); the one-shot commands are its `-cli` device, with a directory of their own.
enum DataHome {
    static var base: String {
        let environment = ProcessInfo.processInfo.environment
        // The XDG spec says a relative XDG_DATA_HOME is to be ignored.
        if let base = environment["XDG_DATA_HOME"], base.hasPrefix("/") { return base + "/simp" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share/simp"
    }

    /// The data directory of `device` of this installation.
    static func directory(of device: String) -> String {
        (base as NSString).appendingPathComponent(device)
    }

    /// The other devices of this installation whose identity a device may take without a code
    /// (`SIMPClient.linkThisDevice(fromDataDirectory:)`): the REPL's and the one-shots' first
    /// (whichever was used first made the identity), then every other device directory here
    /// (`--device NAME` without `--data-dir`). All are this user account's files on this machine.
    static func siblings(of device: String) -> [String] {
        let installation = DeviceFile.name()
        let others = ((try? FileManager.default.contentsOfDirectory(atPath: base)) ?? []).sorted()
        var names: [String] = []
        for name in [installation, installation + "-cli"] + others where name != device && !names.contains(name) {
            names.append(name)
        }
        return names.map(directory(of:))
    }
}

/// One process at a time on a user's file in a data directory: two would seal with the same
/// MLS keys (a key used twice) and each would overwrite the other's state. Held until the
/// process exits (the kernel lets go of it then, whatever the exit).
enum DataDirectoryLock {
    /// The lock files held by this process, kept open (by path). Taken and let go by the
    /// command's own task, one after the other (`ConnectionOptions.configuration`,
    /// `prepareOneShotDevice`); a mutex all the same, which costs nothing here.
    private static let held = Mutex<[String: Int32]>([:])

    /// Takes `DIR/USER.lock`, waiting up to `wait` seconds for another process to let go; throws
    /// a message that says who holds it and what to do.
    static func take(_ directory: String, user: String, wait: Double) throws {
        let path = (directory as NSString).appendingPathComponent("\(user).lock")
        if held.withLock({ $0[path] }) != nil { return }
        do {
            // The user's alone, as the library makes it: the directory holds private keys.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw DataDirectoryError(description: "cannot create the data directory \(directory): \(error.localizedDescription)")
        }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw DataDirectoryError(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        let deadline = Date().addingTimeInterval(wait)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, Date() < deadline else {
                let reason = errno == EWOULDBLOCK ? nil : String(cString: strerror(errno))
                close(fd)
                if let reason { throw DataDirectoryError(description: "cannot lock \(path): \(reason)") }
                throw DataDirectoryError(description: """
                    the data directory \(directory) is in use by another simp of the same device for \(user) \
                    (a REPL, or simp listen, history or verify\(wait > 0 ? ", or a one-shot command still running after \(Int(wait)) s" : "")): \
                    close it, use it from there, or give another --device (a device of its own) or --data-dir
                    """)
            }
            usleep(100_000)
        }
        held.withLock { $0[path] = fd }
    }

    /// Lets go of `DIR/USER.lock` (taken for a while only: `ConnectionOptions.prepareOneShotDevice`).
    static func release(_ directory: String, user: String) {
        let path = (directory as NSString).appendingPathComponent("\(user).lock")
        guard let fd = held.withLock({ $0.removeValue(forKey: path) }) else { return }
        close(fd)
    }
}

struct DataDirectoryError: Error, CustomStringConvertible {
    var description: String
}
