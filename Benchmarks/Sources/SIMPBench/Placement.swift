import Foundation
import SIMPClient

/// Which node each client connects to first. Pair i's sender starts on node i % N and its
/// receiver on node (i + 1) % N, so with several nodes every message crosses from one node to
/// another. Every client is given all nodes, its own first, so it can fail over.
public struct Placement: Sendable {
    public let nodes: [ServerAddress]
    /// Every client takes messages before they are stored (`ClientConfiguration.earlyDelivery`).
    public let earlyDelivery: Bool
    /// Every client sends through a congestion window (`ClientConfiguration.congestionControl`).
    public let congestionControl: Bool

    /// Every client keeps its outbox, history and keys in this directory (one file per user).
    public var dataDirectory: String?
    /// Every client end-to-end encrypts (`ClientConfiguration.endToEnd`; needs `dataDirectory`).
    public var endToEnd = false

    public init(nodes: [ServerAddress], earlyDelivery: Bool = false, congestionControl: Bool = true) {
        precondition(!nodes.isEmpty, "a placement needs a node")
        self.nodes = nodes
        self.earlyDelivery = earlyDelivery
        self.congestionControl = congestionControl
    }

    public func sender(pair: Int) -> ClientConfiguration { configuration(startingAt: pair) }

    public func receiver(pair: Int) -> ClientConfiguration { configuration(startingAt: pair + 1) }

    /// All nodes, from node `index % N` on and round to the one before it.
    public func configuration(startingAt index: Int) -> ClientConfiguration {
        let first = index % nodes.count
        var configuration = ClientConfiguration(servers: Array(nodes[first...] + nodes[..<first]))
        configuration.earlyDelivery = earlyDelivery
        configuration.congestionControl = congestionControl
        configuration.dataDirectory = dataDirectory
        configuration.endToEnd = endToEnd
        return configuration
    }

    /// `--server`'s value: HOST:PORT, or several nodes of one deployment as HOST:PORT,HOST:PORT,...
    /// (an IPv6 host in brackets: [::1]:7700).
    public static func parse(_ list: String) throws -> [ServerAddress] {
        let nodes = try list.split(separator: ",").map { entry in
            let text = entry.trimmingCharacters(in: .whitespaces)
            guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
                  (1...65535).contains(port), colon > text.startIndex else {
                throw BenchError("--server takes HOST:PORT[,HOST:PORT...], not \"\(text)\"")
            }
            var host = text[..<colon]
            if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            return ServerAddress(host: String(host), port: port)
        }
        guard !nodes.isEmpty else { throw BenchError("--server takes HOST:PORT[,HOST:PORT...]") }
        return nodes
    }
}
