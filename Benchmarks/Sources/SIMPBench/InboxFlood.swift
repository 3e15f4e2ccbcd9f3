import Foundation
import MQTTLoad
import NIOConcurrencyHelpers
import NIOCore
import SIMPClient

/// An inbox filler as a benchmark (AbuseTests' filler, for as long as the pattern runs): the
/// pattern's conversations are measured quiet, then again while one client posts bursts of
/// 3,000 messages to a user who never connects, the next burst as soon as the server has
/// answered the last (accepted until the filler's share of that inbox is full, refused after).
/// Each sender's messages take turns in the server's store queue, so the flooded figures
/// should stay near the quiet ones.
public enum InboxFlood {
    public struct Result: Sendable {
        public var quiet: LoadResult
        public var flooded: LoadResult
        /// The filler's messages the server answered during the flooded run.
        public var accepted: Int
        public var refused: Int
    }

    static let burst = 3_000
    static let filler = "bench-filler"
    static let absent = "bench-absent"

    public static func run(_ pattern: LoadPattern, placement: Placement, group: any EventLoopGroup, processes: ProcessGroups,
                           progress: @escaping @Sendable (String) -> Void) async throws -> Result {
        let quiet = try await SIMPLoad.run(pattern, placement: placement, group: group, processes: processes, progress: progress)
        let configuration = placement.configuration(startingAt: 0)
        // Registered, never connected: everything posted to it waits in its inbox.
        await (try SIMPLoad.connectedClient(absent, configuration, group)).close()
        let answers = NIOLockedValueBox((accepted: 0, refused: 0))
        let client = try await SIMPLoad.connectedClient(filler, configuration, group) { event in
            switch event {
            case .accepted: answers.withLockedValue { $0.accepted += 1 }
            case .failed: answers.withLockedValue { $0.refused += 1 }
            default: break
            }
        }
        progress("flooding: \(filler) posts \(burst) messages at a time to \(absent), who never connects")
        let flood = Task { try await fill(client, answers) }
        let flooded: LoadResult
        do {
            flooded = try await SIMPLoad.run(pattern, placement: placement, group: group, processes: processes, progress: progress)
        } catch {
            flood.cancel()
            await client.close()
            throw error
        }
        flood.cancel()
        _ = await flood.result
        await client.close()
        let (accepted, refused) = answers.withLockedValue { $0 }
        return Result(quiet: quiet, flooded: flooded, accepted: accepted, refused: refused)
    }

    /// Bursts until cancelled, each once the server has answered most of the one before.
    private static func fill(_ client: SIMPClient, _ answers: NIOLockedValueBox<(accepted: Int, refused: Int)>) async throws {
        var posted = 0
        while !Task.isCancelled {
            for n in 0..<burst { _ = try client.post(to: absent, text: "fill \(posted + n)") }
            posted += burst
            while !Task.isCancelled, answers.withLockedValue({ $0.accepted + $0.refused }) < posted - burst / 10 {
                try? await Task.sleep(for: .milliseconds(10))
            }
        }
    }
}
