import ArgumentParser
import Foundation
import SIMPClient
import SIMPTerminal

/// `/verify USER [NUMBER]` and `simp verify USER [--number N]`: the safety number of the user
/// and USER, and marking it verified once the two compared it (docs/E2EE.md, "Verification").
enum Verification {
    /// Sets this device's identity up if it has none (the first device makes it), then shows
    /// the safety number with `peer`, or marks it verified when `number` is the one compared.
    static func run(_ peer: String, number: String?, on client: SIMPClient) async throws(ClientError) -> RequestResult {
        let identity = try await client.setUpIdentity()
        guard identity != .needsLinking else {
            throw ClientError("this device does not hold your identity (another device of yours made it): "
                + "it must be linked from that device first")
        }
        if let number {
            try await client.markVerified(peer, number: number)
            let check = try await client.safetyNumber(with: peer)
            return result(check, note: "\(peer) verified")
        }
        let check = try await client.safetyNumber(with: peer)
        let note = check.verified ? "verified" : "not verified: compare it with \(peer) (in person, or on a call), then /verify \(peer) NUMBER"
        return result(check, note: note)
    }

    static func result(_ check: SafetyCheck, note: String) -> RequestResult {
        var lines = ["safety number with \(check.user):", "  " + check.number, note]
        if check.identityChanged { lines.insert(REPLScreen.identityChangedText(check.user), at: 0) }
        return RequestResult(human: lines.joined(separator: "\n"),
                             json: ["event": "safety-number", "user": check.user, "number": check.number, "verified": check.verified,
                                    "identityChanged": check.identityChanged])
    }
}

/// `simp verify USER`: prints the safety number with USER (making this device's identity
/// first if the user has none), or with `--number` marks USER verified. It is the REPL's device
/// with the REPL's data directory (where the verified keys are kept), so it waits for no REPL:
/// with one running, it says so (`DataDirectoryLock`), and /verify is used there.
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the safety number you and USER compare, or mark USER verified with --number.")

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The other user.")
    var peer: String

    @Option(help: "The safety number you compared with USER (spaces allowed): marks USER verified.")
    var number: String?

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() async throws {
        let output = Output(json: json)
        let plan = try connection.loginPlan(needsPassword: false)
        guard connection.endToEnd else { throw ValidationError("simp verify is for an encrypting device: not with --no-e2e") }
        let client = SIMPClient(configuration: try connection.configuration(plan))
        do {
            try await connection.connect(client, plan, save: false)
            // Takes the identity from the installation's other device when that one made it.
            _ = try await connection.setUpIdentity(client, commandLine: false)
        } catch {
            await client.close()
            output.problem(describe(error))
            throw ExitCode(ExitStatus.failure)
        }
        do {
            output.result(try await Verification.run(peer, number: number, on: client))
            await client.close()
        } catch {
            await client.close()
            output.problem(error.message)
            throw ExitCode(error.code == nil ? ExitStatus.failure : ExitStatus.refused)
        }
    }
}
