import NIOCore

/// One sender/receiver pair of a load run through a broker: its connections open and close
/// on its own event loop.
public protocol LoadPair: Sendable {
    func open(host: String, port: Int) -> EventLoopFuture<Void>
    func close() -> EventLoopFuture<Void>
}

public enum LoadPairs {
    /// Opens every pair at once; if any fails, all are closed once every attempt has ended.
    public static func open(_ pairs: [some LoadPair], host: String, port: Int) async throws {
        var firstError: (any Error)?
        for opening in pairs.map({ $0.open(host: host, port: port) }) {
            do {
                try await opening.get()
            } catch {
                firstError = firstError ?? error
            }
        }
        guard let firstError else { return }
        await close(pairs)
        throw firstError
    }

    public static func close(_ pairs: [some LoadPair]) async {
        for closing in pairs.map({ $0.close() }) { try? await closing.get() }
    }
}
