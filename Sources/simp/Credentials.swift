import Foundation
import SIMPClient
import SIMPCore

/// A login saved by `simp login` or `--save-login`: the server, the user and the login token,
/// never the password. The token is as good as the password until it expires or `/logout`
/// revokes it, so the file is 0600 in a 0700 directory.
struct SavedLogin: Codable, Equatable {
    var server: String
    var user: String
    /// Made over TLS: the token must not then be sent over plain TCP.
    var tls: Bool
    var token: String
    /// Milliseconds since 1970.
    var expiresAt: Int64

    var loginToken: LoginToken { LoginToken(value: token, expiresAt: expiresAt) }
}

struct CredentialsError: Error, CustomStringConvertible {
    var description: String
}

/// $XDG_CONFIG_HOME/simp/credentials (default ~/.config/simp/credentials), holding one login.
enum CredentialsFile {
    static var path: String {
        let environment = ProcessInfo.processInfo.environment
        // The XDG spec says a relative XDG_CONFIG_HOME is to be ignored.
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return base + "/simp/credentials" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.config/simp/credentials"
    }

    /// nil when there is no file or it is not a saved login.
    static func load() -> SavedLogin? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(SavedLogin.self, from: data)
    }

    /// Replaces the file whole (write to a new file, then rename), so a reader never sees half
    /// of it, and creates it 0600 so the token is never readable by others, not even briefly.
    static func save(_ login: SavedLogin) throws {
        let directory = (path as NSString).deletingLastPathComponent
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw CredentialsError(description: "cannot create \(directory): \(error.localizedDescription)")
        }
        guard chmod(directory, 0o700) == 0 else { throw failure("chmod", directory) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        let data = try encoder.encode(login) + Data("\n".utf8)
        let temporary = path + ".new"
        unlink(temporary)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw failure("cannot create", temporary) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        close(fd)
        guard written == data.count, synced, rename(temporary, path) == 0 else {
            let error = failure("cannot write", path)
            unlink(temporary)
            throw error
        }
    }

    /// Removes the saved login if it is this server's and user's (its token no longer works).
    static func forget(server: String, user: String) {
        guard let saved = load(), saved.server == server, saved.user == user else { return }
        unlink(path)
    }

    private static func failure(_ what: String, _ file: String) -> CredentialsError {
        CredentialsError(description: "\(what) \(file): \(String(cString: strerror(errno)))")
    }
}

/// $XDG_CONFIG_HOME/simp/device (default ~/.config/simp/device): this installation's device
/// name, made once at random (`d-` and 8 hex digits) so one installation is one device.
enum DeviceFile {
    static var path: String {
        ((CredentialsFile.path as NSString).deletingLastPathComponent as NSString).appendingPathComponent("device")
    }

    /// The saved name; a new one is made and saved when there is none. Where it cannot be saved
    /// (a read-only home), the name of a client that names no device, "default".
    static func name() -> String {
        if let data = FileManager.default.contents(atPath: path) {
            let saved = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if DeviceName.isValid(saved) { return saved }
        }
        let made = "d-" + String(format: "%08x", UInt32.random(in: 1...UInt32.max))
        let directory = (path as NSString).deletingLastPathComponent
        guard (try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)) != nil,
              FileManager.default.createFile(atPath: path, contents: Data((made + "\n").utf8)) else { return DeviceName.unnamed }
        return made
    }
}
