import Foundation
import SIMPTestSupport
import Testing

/// `simp-server --print-config` as an operator runs it: every setting with its value and its
/// source, nothing started, nothing secret.
@Suite(.serialized) struct PrintConfigTests {
    /// The printed settings by name: (value, source).
    func printConfig(_ args: [String], environment: [String: String] = [:]) throws -> [String: (value: String, source: String)] {
        let process = try ChildProcess(try productPath("simp-server"), ["--print-config"] + args, environment: environment)
        #expect(process.waitForExit(timeout: 10) == 0, "stderr: \(process.stderr)")
        var settings: [String: (value: String, source: String)] = [:]
        for line in process.stdout.split(separator: "\n") {
            guard let match = line.wholeMatch(of: /(\S+) = (.*)  \((flag|default|env SIMP_[A-Z_]+)\)/) else {
                Issue.record("unexpected line: \(line)")
                continue
            }
            settings[String(match.1)] = (String(match.2), String(match.3))
        }
        return settings
    }

    @Test func defaultsAreShownAsDefault() throws {
        let settings = try printConfig([])
        #expect(settings["host"]?.value == "127.0.0.1" && settings["host"]?.source == "default")
        #expect(settings["port"]?.value == "7700" && settings["port"]?.source == "default")
        #expect(settings["udp-port"]?.value == "7701 (port + 1)")
        #expect(settings["redis"]?.value == "redis://127.0.0.1:6379")
        #expect(settings["heartbeat"]?.value == "30 s")
        #expect(settings["max-msgs-per-sec"]?.value == "1000")
        #expect(settings["metrics-port"]?.value == "off")
        #expect(settings["log-format"]?.value == "text" && settings["log-format"]?.source == "default")
        #expect(settings["log-level"]?.value == "info")
        #expect(settings.values.allSatisfy { $0.source == "default" })
        for name in ["node-id", "redis-wait", "tls-cert", "tls-key", "event-loops", "inbox-limit", "frame-deadline"] {
            #expect(settings[name] != nil, "\(name) missing")
        }
    }

    @Test func flagsAreShownAsFlag() throws {
        let settings = try printConfig(["--port", "9000", "--heartbeat", "2.5", "--log-format", "json",
                                        "--tls-cert", "/etc/simp/cert.pem", "--tls-key", "/etc/simp/key.pem",
                                        "--max-sessions-per-user", "3"])
        #expect(settings["port"]?.value == "9000" && settings["port"]?.source == "flag")
        #expect(settings["udp-port"]?.value == "9001 (port + 1)" && settings["udp-port"]?.source == "default")
        #expect(settings["heartbeat"]?.value == "2.5 s" && settings["heartbeat"]?.source == "flag")
        #expect(settings["log-format"]?.value == "json" && settings["log-format"]?.source == "flag")
        #expect(settings["tls-key"]?.value == "/etc/simp/key.pem" && settings["tls-key"]?.source == "flag")
        #expect(settings["max-sessions-per-user"]?.value == "3" && settings["max-sessions-per-user"]?.source == "flag")
        #expect(settings["host"]?.source == "default")
    }

    @Test func environmentIsShownAsEnvAndAFlagBeatsIt() throws {
        let settings = try printConfig(["--node-id", "from-flag"],
                                       environment: ["SIMP_NODE_ID": "from-env", "SIMP_METRICS_PORT": "9100",
                                                     "SIMP_LOG_FORMAT": "json", "SIMP_LOG_LEVEL": "debug"])
        #expect(settings["node-id"]?.value == "from-flag" && settings["node-id"]?.source == "flag")
        #expect(settings["metrics-port"]?.value == "9100" && settings["metrics-port"]?.source == "env SIMP_METRICS_PORT")
        #expect(settings["log-format"]?.value == "json" && settings["log-format"]?.source == "env SIMP_LOG_FORMAT")
        #expect(settings["log-level"]?.value == "debug" && settings["log-level"]?.source == "env SIMP_LOG_LEVEL")
    }

    /// SIMP sends no AUTH: a Redis URL with a password is refused, and the password is not
    /// repeated in the error (nor printed anywhere else).
    @Test func aRedisPasswordIsRefusedNotPrinted() throws {
        let process = try ChildProcess(try productPath("simp-server"), ["--print-config"],
                                       environment: ["SIMP_REDIS_URL": "redis://admin:hunter2@cache:6380/1"])
        let status = process.waitForExit(timeout: 10)
        #expect(status != nil && status != 0)
        #expect(process.stderr.contains("not supported") && !process.stderr.contains("hunter2"), "\(process.stderr)")
        #expect(!process.stdout.contains("hunter2"))
    }
}
