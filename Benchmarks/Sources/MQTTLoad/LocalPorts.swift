import Foundation
import NIOCore
import NIOPosix

/// Loopback ports for the servers a bench run starts.
public enum LocalPorts {
    /// A port the kernel just handed out (bound to 0 and closed again).
    public static func free() async throws -> Int {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        try await channel.close()
        return port
    }

    /// True once something accepts connections on 127.0.0.1:`port`; false after `seconds`.
    public static func waitUntilListening(_ port: Int, seconds: Double) async throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let channel = try? await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connect(host: "127.0.0.1", port: port).get() {
                try? await channel.close()
                return true
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}
