#if canImport(Glibc)
import Glibc
#endif
import Foundation
import MQTTLoad

/// A private RabbitMQ node for one run: its own epmd, node name, AMQP and distribution ports
/// (all loopback), and data, logs and configuration in a temporary directory that stop() removes.
public final class RabbitMQBroker: LocalBroker {
    public let port: Int
    /// The Erlang VM (beam.smp), which does the broker's work: sample its CPU.
    public let pid: Int32
    /// The rabbitmq-server script, the VM's parent: it turns a SIGTERM into a clean stop.
    private let script: Int32
    private let epmd: Int32
    private let directory: String
    private let stopping = StopOnce()

    static let name = "rabbitmq-server"
    static let install = "scripts/install-brokers.sh (apt-get install rabbitmq-server)"

    /// Debian's /usr/sbin/rabbitmq-server is a wrapper that switches to the rabbitmq user and
    /// drops the environment this run configures the node with: the script it wraps instead.
    public static func executable() -> String? {
        BrokerStartup.executable([name], in: ["/usr/lib/rabbitmq/bin"]) { path in
            URL(fileURLWithPath: path).resolvingSymlinksInPath().lastPathComponent != "rabbitmq-script-wrapper"
        }
    }

    public static func start() async throws -> RabbitMQBroker {
        guard let binary = executable() else { throw DurableLoadError.brokerNotFound(broker: name, install: install) }
        guard let epmd = BrokerStartup.executable(["epmd"], in: ["/usr/bin", "/usr/lib/erlang/bin"]) else {
            throw DurableLoadError.brokerNotFound(broker: "epmd", install: "apt-get install erlang-base (rabbitmq-server depends on it)")
        }
        return try await BrokerStartup.withRetries(name) {
            let ports = try await BrokerStartup.freePorts(3)
            return try await start(binary, epmd: epmd, node: RabbitMQNode(amqpPort: ports[0], distributionPort: ports[1], epmdPort: ports[2]))
        }
    }

    private static func start(_ binary: String, epmd epmdBinary: String, node: RabbitMQNode) async throws -> RabbitMQBroker {
        let directory = try BrokerStartup.directory("rabbitmq")
        var started: [BrokerProcess] = []
        do {
            try node.writeFiles(in: directory)
            let epmd = try BrokerProcess.start(epmdBinary, ["-address", "127.0.0.1", "-port", "\(node.epmdPort)"],
                                               outputFile: directory + "/epmd.output")
            started.append(epmd)
            try await BrokerStartup.waitUntilListening(node.epmdPort, epmd, broker: "epmd", seconds: 10)
            let script = try BrokerProcess.start(binary, [], environment: node.environment(directory), outputFile: directory + "/output")
            started.append(script)
            try await waitUntilReady(node, script)
            guard let vm = virtualMachine(of: script.pid) else {
                throw DurableLoadError.brokerDidNotStart(broker: name, why: "no beam.smp under the rabbitmq-server script")
            }
            return RabbitMQBroker(port: node.amqpPort, pid: vm, script: script.pid, epmd: epmd.pid, directory: directory)
        } catch {
            // An early exit is the last process started, already reaped: there is nothing left to signal.
            let running = error is BrokerStartup.EarlyExit ? started.dropLast() : started[...]
            await ChildProcesses.terminate(running.reversed().map(\.pid))
            try? FileManager.default.removeItem(atPath: directory)
            throw error
        }
    }

    /// Booting takes seconds (20 on a loaded two-core machine): the AMQP port opens near the
    /// end, and a login shows the broker answers.
    private static func waitUntilReady(_ node: RabbitMQNode, _ script: BrokerProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            let left = deadline - ContinuousClock.now
            try await BrokerStartup.waitUntilListening(node.amqpPort, script, broker: name, seconds: Double(left.components.seconds))
            do {
                return try await login(node.amqpPort)
            } catch where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }

    private static func login(_ port: Int) async throws {
        try await Blocking.run {
            let connection = try AMQPConnection(host: "127.0.0.1", port: port)
            connection.close()
        }
    }

    /// The script runs the VM as its child (the `erl` it starts execs into beam.smp).
    static func virtualMachine(of script: Int32) -> Int32? {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.first { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
            return ProcStat(stat).map { $0.parent == script && $0.name == "beam.smp" } ?? false
        }
    }

    private init(port: Int, pid: Int32, script: Int32, epmd: Int32, directory: String) {
        self.port = port
        self.pid = pid
        self.script = script
        self.epmd = epmd
        self.directory = directory
    }

    /// SIGTERM to the script, which stops the node and waits for it; a VM that outlives a
    /// SIGKILLed script is killed too. Then epmd. Only the first call does anything.
    public func stop() async {
        guard stopping.first() else { return }
        await ChildProcesses.terminate([script])
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        await ChildProcesses.terminate([epmd])
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A node's ports and name, and the files and environment that give it them.
struct RabbitMQNode {
    let amqpPort: Int
    let distributionPort: Int
    let epmdPort: Int

    /// Unique per run: several nodes may share a machine.
    var nodeName: String { "simp-bench-\(amqpPort)@localhost" }

    /// Everything the node would read from /etc/rabbitmq or /var/lib/rabbitmq points into
    /// `directory` instead; HOME too, for the Erlang cookie.
    func environment(_ directory: String) -> [String: String] {
        [
            "HOME": directory,
            "ERL_EPMD_PORT": "\(epmdPort)",
            "RABBITMQ_NODENAME": nodeName,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": "\(amqpPort)",
            "RABBITMQ_DIST_PORT": "\(distributionPort)",
            "RABBITMQ_MNESIA_BASE": directory + "/mnesia",
            "RABBITMQ_LOG_BASE": directory + "/log",
            "RABBITMQ_LOGS": "-",
            "RABBITMQ_CONFIG_FILE": directory + "/rabbitmq.conf",
            "RABBITMQ_ADVANCED_CONFIG_FILE": directory + "/advanced.config",
            "RABBITMQ_CONF_ENV_FILE": directory + "/rabbitmq-env.conf",
            "RABBITMQ_ENABLED_PLUGINS_FILE": directory + "/enabled_plugins",
            "RABBITMQ_PID_FILE": directory + "/rabbitmq.pid",
        ]
    }

    /// No plugins (no management UI); warnings and errors only, to stdout, which BrokerProcess keeps.
    func writeFiles(in directory: String) throws {
        for sub in ["mnesia", "log"] {
            try FileManager.default.createDirectory(atPath: directory + "/" + sub, withIntermediateDirectories: true)
        }
        try "[].\n".write(toFile: directory + "/enabled_plugins", atomically: true, encoding: .utf8)
        try "".write(toFile: directory + "/rabbitmq-env.conf", atomically: true, encoding: .utf8)
        try "log.console = true\nlog.console.level = warning\nlog.file = false\n"
            .write(toFile: directory + "/rabbitmq.conf", atomically: true, encoding: .utf8)
    }
}

/// The fields of /proc/PID/stat this package reads.
struct ProcStat {
    let name: String
    let parent: Int32

    /// The name (field 2) may hold spaces and parentheses: fields are counted after its last ')'.
    init?(_ stat: String) {
        guard let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, let parent = Int32(fields[1]) else { return nil }
        name = String(stat[stat.index(after: open)..<close])
        self.parent = parent
    }
}

/// Blocking work (librabbitmq calls) on a thread of its own, off the Swift concurrency pool.
enum Blocking {
    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try work() })
            }.start()
        }
    }
}
