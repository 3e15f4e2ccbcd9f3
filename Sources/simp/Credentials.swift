import Foundation
import SIMPClient
import SIMPCore
import SIMPTerminal

/// A login saved by `simp login` or `--save-login`: the server, the user and a login token per
/// device, never the password. A token opens sessions for its own device only, and the REPL
/// and the one-shot commands are different devices (`ConnectionOptions.deviceName`), so each
/// has its own. A token is as good as the password for its device until it expires or
/// `/logout` revokes it, so the file is 0600 in a 0700 directory.
struct SavedLogin: Codable, Equatable {
    struct Token: Codable, Equatable {
        var token: String
        /// Milliseconds since 1970.
        var expiresAt: Int64
    }

    var server: String
    var user: String
    /// Made over TLS: the tokens must not then be sent over plain TCP.
    var tls: Bool
    /// By device name.
    var tokens: [String: Token]

    /// The token saved for `device`, if any.
    func loginToken(for device: String) -> LoginToken? {
        tokens[device].map { LoginToken(value: $0.token, expiresAt: Date(millisSince1970: $0.expiresAt)) }
    }

    /// This login with `token` saved for `device` too: beside the others when it is the same
    /// server, user and TLS, else alone.
    func adding(_ token: LoginToken, for device: String, server: String, user: String, tls: Bool) -> SavedLogin {
        var login = self.server == server && self.user == user && self.tls == tls ? self : SavedLogin(server: server, user: user, tls: tls, tokens: [:])
        login.tokens[device] = Token(token: token.value, expiresAt: token.expiresAt.millisSince1970)
        return login
    }
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

    /// nil when there is no file or it is not a saved login (one of the form before tokens were
    /// saved per device is not: its token opens no session any more).
    static func load() -> SavedLogin? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        return try? JSONDecoder().decode(SavedLogin.self, from: data)
    }

    /// Saves `token` for `device`, beside the tokens saved for other devices of the same login.
    static func save(_ token: LoginToken, for device: String, server: String, user: String, tls: Bool) throws {
        let empty = SavedLogin(server: server, user: user, tls: tls, tokens: [:])
        try save((load() ?? empty).adding(token, for: device, server: server, user: user, tls: tls))
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
