import ArgumentParser
import Foundation
import SIMPClient

/// `simp password`: changes the password with the old one; the server ends every other login
/// of the user (their tokens stop working, their connections close on every device).
struct Password: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Change your password: every other login of yours ends, on every device.",
        discussion: "The old password comes from --password, SIMP_PASSWORD or a prompt; the new one from "
            + "SIMP_NEW_PASSWORD or a prompt (typed twice). A saved login (simp login) is not kept: log in again with the new password.")

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let output = Output(json: false)
        let plan = try connection.loginPlan(needsPassword: true)
        guard case .password(let old) = plan.method else { throw ValidationError("the old password is needed: pass --password or SIMP_PASSWORD") }
        let new = try Self.newPassword()
        let client = try await openSession(connection, output, plan: plan, identity: false)
        do {
            try await client.changePassword(from: old, to: new)
        } catch {
            await client.close()
            output.problem("password not changed: \(error.message)")
            throw ExitCode(error.code == .invalidCredentials || error.code == .loginThrottled ? ExitStatus.authentication : ExitStatus.refused)
        }
        await client.close()
        // The saved token was issued before the change: it no longer works.
        CredentialsFile.forget(server: plan.server, user: plan.user)
        output.info("password of \(plan.user) changed; every other login ended")
    }

    /// SIMP_NEW_PASSWORD, else typed twice on a terminal.
    private static func newPassword() throws -> String {
        if let given = ProcessInfo.processInfo.environment["SIMP_NEW_PASSWORD"] { return given }
        guard isatty(STDIN_FILENO) == 1, let first = getpass("new password: ").map({ String(cString: $0) }),
              let second = getpass("new password again: ").map({ String(cString: $0) }) else {
            throw ValidationError("no new password: set SIMP_NEW_PASSWORD, or run on a terminal")
        }
        guard first == second else { throw ValidationError("the two new passwords differ; nothing changed") }
        return first
    }
}
