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
            guard let match = line.wholeMatch(of: /(\S+) = (.*)  \((flag|default|env SIMP_[A-Z0-9_]+|file .+)\)/) else {
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
        #expect(settings["heartbeat"]?.value == "60 s")
        #expect(settings["max-msgs-per-sec"]?.value == "1000")
        #expect(settings["metrics-port"]?.value == "off")
        #expect(settings["log-format"]?.value == "text" && settings["log-format"]?.source == "default")
        #expect(settings["log-level"]?.value == "info")
        // Issue 44: a message that is not end-to-end encrypted is refused unless asked otherwise.
        #expect(settings["e2e"]?.value == "required" && settings["e2e"]?.source == "default")
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
        let optional = try printConfig([], environment: ["SIMP_E2E": "optional"])
        #expect(optional["e2e"]?.value == "optional" && optional["e2e"]?.source == "env SIMP_E2E")
    }

    /// A Redis password (for AUTH) is shown as ***, wherever it comes from.
    @Test func aRedisPasswordIsMaskedNotPrinted() throws {
        let settings = try printConfig([], environment: ["SIMP_REDIS_URL": "redis://admin:hunter2@cache:6380/1"])
        #expect(settings["redis"]?.value == "redis://admin:***@cache:6380/1" && settings["redis"]?.source == "env SIMP_REDIS_URL")
        #expect(settings["redis-password"]?.value == "none")
        let fromEnvironment = try printConfig([], environment: ["SIMP_REDIS_PASSWORD": "hunter2"])
        #expect(fromEnvironment["redis-password"]?.value == "***" && fromEnvironment["redis-password"]?.source == "env SIMP_REDIS_PASSWORD")
        #expect(!fromEnvironment.values.contains { $0.value.contains("hunter2") })
    }

    /// A config file fills in what neither a flag nor the environment sets, and says so.
    @Test func theConfigFileIsShownAsFileBelowEnvAndFlags() throws {
        let file = try ConfigFileFixture("""
            {"node-id": "from-file", "port": 9000, "heartbeat": 2.5, "max-conns-per-ip": 7,
             "log-format": "json", "frame-deadline": 4, "redis": "redis://cache:6380/2"}
            """)
        let settings = try printConfig(["--config", file.path, "--heartbeat", "3"], environment: ["SIMP_PORT": "9100"])
        let source = "file \(file.path)"
        #expect(settings["config"]?.value == file.path && settings["config"]?.source == "flag")
        #expect(settings["node-id"]?.value == "from-file" && settings["node-id"]?.source == source)
        #expect(settings["max-conns-per-ip"]?.value == "7" && settings["max-conns-per-ip"]?.source == source)
        #expect(settings["log-format"]?.value == "json" && settings["log-format"]?.source == source)
        #expect(settings["frame-deadline"]?.value == "4 s" && settings["frame-deadline"]?.source == source)
        #expect(settings["redis"]?.value == "redis://cache:6380/2" && settings["redis"]?.source == source)
        #expect(settings["port"]?.value == "9100" && settings["port"]?.source == "env SIMP_PORT")
        #expect(settings["udp-port"]?.value == "9101 (port + 1)")
        #expect(settings["heartbeat"]?.value == "3 s" && settings["heartbeat"]?.source == "flag")
        #expect(settings["inbox-share"]?.value == "2500" && settings["inbox-share"]?.source == "default")
    }

    /// SIMP_CONFIG names the file, and every setting has an environment variable of its name.
    @Test func theFileFromSIMP_CONFIGAndEveryNameInTheEnvironment() throws {
        let file = try ConfigFileFixture(#"{"inbox-share": 40, "max-msgs-per-sec": 50}"#)
        let settings = try printConfig([], environment: ["SIMP_CONFIG": file.path, "SIMP_MAX_MSGS_PER_SEC": "60",
                                                         "SIMP_UNREAD_GRACE": "12", "SIMP_REDIS_URL": "redis://10.0.0.2:6379"])
        #expect(settings["config"]?.value == file.path && settings["config"]?.source == "env SIMP_CONFIG")
        #expect(settings["inbox-share"]?.value == "40" && settings["inbox-share"]?.source == "file \(file.path)")
        #expect(settings["max-msgs-per-sec"]?.value == "60" && settings["max-msgs-per-sec"]?.source == "env SIMP_MAX_MSGS_PER_SEC")
        #expect(settings["unread-grace"]?.value == "12 s" && settings["unread-grace"]?.source == "env SIMP_UNREAD_GRACE")
        #expect(settings["redis"]?.source == "env SIMP_REDIS_URL")
    }

    /// Each mistake in a file stops the server before it starts, with one line naming the file
    /// and the key (and never the value, which might be a secret).
    @Test func aBadConfigFileIsRefusedNamingTheKeyAndTheFile() throws {
        let cases: [(json: String, says: String)] = [
            (#"{"max-con-per-ip": 3}"#, #"unknown key "max-con-per-ip""#),
            (#"{"tls": {"cert": "/x.pem"}}"#, #"unknown key "tls""#),
            (#"{"config": "/other.json"}"#, #"unknown key "config""#),
            (#"{"port": "seven"}"#, #""port" must be a whole number"#),
            (#"{"heartbeat": "soon"}"#, #""heartbeat" must be a number"#),
            (#"{"log-level": "loud"}"#, #""log-level" must be one of trace, debug"#),
            (#"{"max-conns-per-ip": 0}"#, "max-conns-per-ip = 0 (file "),
            (#"{"port": 70000}"#, "port = 70000 (file "),
            (#"{"tls-cert": "/etc/simp/cert.pem"}"#, "--tls-cert and --tls-key go together"),
            (#"{"redis-password": "hunter2"}"#, #""redis-password" is not read from a file"#),
            (#"{"port": 7700,"#, "not valid JSON"),
            (#"[1, 2]"#, "the top level must be a JSON object"),
        ]
        for (json, says) in cases {
            let file = try ConfigFileFixture(json)
            let process = try ChildProcess(try productPath("simp-server"), ["--print-config", "--config", file.path])
            let status = process.waitForExit(timeout: 10)
            #expect(status != nil && status != 0, "\(json) was accepted")
            #expect(process.stderr.contains(says), "\(json): \(process.stderr)")
            if !says.hasPrefix("--tls") {
                #expect(process.stderr.contains(file.path), "\(json): \(process.stderr)")
            }
            #expect(!process.stderr.contains("hunter2") && process.stdout.isEmpty)
        }
        let missing = try ChildProcess(try productPath("simp-server"), ["--print-config", "--config", "/nonexistent/simp.json"])
        #expect(missing.waitForExit(timeout: 10) == 1)
        #expect(missing.stderr.contains("config file /nonexistent/simp.json: cannot read it"), "\(missing.stderr)")
        let env = try ChildProcess(try productPath("simp-server"), ["--print-config"], environment: ["SIMP_MAX_CONNS_PER_IP": "many"])
        #expect(env.waitForExit(timeout: 10) == 1)
        #expect(env.stderr.contains("SIMP_MAX_CONNS_PER_IP=many: max-conns-per-ip must be a whole number"), "\(env.stderr)")
        let flag = try ChildProcess(try productPath("simp-server"), ["--print-config", "--log-level", "loud"])
        #expect(flag.waitForExit(timeout: 10) == 1)
        #expect(flag.stderr.contains("--log-level loud: must be one of trace, debug"), "\(flag.stderr)")
    }
}

/// A JSON config file in a fresh temporary directory; `write` replaces it whole (a rename, as
/// an operator's editor or config management would).
struct ConfigFileFixture {
    let path: String

    init(_ json: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("simp-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("simp.json").path
        try write(json)
    }

    func write(_ json: String) throws {
        try Data(json.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
