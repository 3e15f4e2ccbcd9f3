import ArgumentParser
import Foundation
import SIMPConformance

@main
struct ConformanceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "simp-conformance",
        abstract: "Checks a SIMP server against docs/PROTOCOL.md on the wire: numbered checks per section, PASS or FAIL each.",
        discussion: "It registers accounts of its own (random names, one starting with d.x-y_) and assumes the server's default limits. It passes against a server with its default settings (simp-server --e2e required) as against one that takes plaintext (--e2e optional): its messages and typing go sealed (made-up MLS PrivateMessages, which a server cannot tell from real ones), and from how the server answers one plaintext message it learns which the server is, and expects what docs/PROTOCOL.md says of that mode where plaintext is a check's subject (2.5, 4.14, 4.19, 4.20, 4.29). The 5.x checks wait for the server's heartbeat (a minute and a half each at the default 60 s). Exit status 0 when every check passes, 1 when one fails.")

    @Option(name: .long, help: "The server's control address, HOST:PORT (a host name or an IPv4 address).")
    var server: String

    @Flag(name: .long, help: "One JSON object per check, then a summary object.")
    var json = false

    @Option(name: .long, help: "Only this check, or this section's checks (e.g. 2 or 4.1; 4.1 is not 4.10).")
    var only: String?

    @Option(name: .long, help: "Expect this end-to-end mode (required or optional) instead of learning it from the server: a server meant to require encryption that takes plaintext then fails the checks whose subject is plaintext.")
    var expectE2e: ConformanceTarget.EndToEnd?

    func validate() throws {
        guard target != nil else {
            throw ValidationError("--server must be HOST:PORT with a host that has an IPv4 address, e.g. localhost:7777, not \(server)")
        }
    }

    var target: ConformanceTarget? {
        let parts = server.split(separator: ":")
        guard parts.count == 2, let port = Int(parts[1]), (1...65535).contains(port),
              let address = ConformanceTarget.ipv4(of: String(parts[0])) else { return nil }
        return ConformanceTarget(host: address, port: port, endToEnd: expectE2e)
    }

    func run() throws {
        let checks = Conformance.all.filter { only == nil || $0.isIn(only!) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let results = Conformance.run(target!, checks: checks) { result in
            if json {
                print(String(decoding: (try? encoder.encode(result)) ?? Data(), as: UTF8.self))
            } else {
                print("\(result.passed ? "PASS" : "FAIL") \(result.id) [\(result.section)] \(result.title)"
                      + (result.passed ? "" : "\n     \(result.detail)"))
            }
            // A line at a time even into a pipe: the heartbeat checks take minutes.
            fflush(nil)
        }
        let failed = results.filter { !$0.passed }.count
        if json {
            print(#"{"checks":\#(results.count),"failed":\#(failed),"passed":\#(results.count - failed)}"#)
        } else {
            print("\(results.count - failed) of \(results.count) checks passed")
        }
        if failed > 0 { throw ExitCode(1) }
    }
}

extension ConformanceTarget.EndToEnd: ExpressibleByArgument {}
