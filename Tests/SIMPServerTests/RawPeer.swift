import Foundation
import SIMPTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The raw answer to one HTTP request over a fresh connection (Connection: close), read until
/// the server closes.
func httpExchange(port: Int, path: String, method: String = "GET") throws -> String {
    let peer = try RawPeer(tcpPort: port, udpPort: 0)
    peer.writeRaw(Array("\(method) \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
    var bytes = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(peer.tcp, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { break }
        bytes += chunk.prefix(n)
    }
    return String(decoding: bytes, as: UTF8.self)
}

extension ServerProcess {
    /// The metrics port from the ready line (the server started with --metrics-port).
    func metricsPort() throws -> Int {
        guard let range = readyLine.range(of: #"metrics=[^ ]+:(\d+)"#, options: .regularExpression),
              let port = Int(readyLine[range].split(separator: ":").last!) else {
            throw TestSupportError("no metrics port in \(readyLine)")
        }
        return port
    }
}
