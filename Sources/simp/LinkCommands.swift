import Foundation
import SIMPClient
import SIMPTerminal

/// `/device link`, `/device links` and `/device approve NAME CODE` (docs/E2EE.md, "Linking a
/// device"): a new device gets the user's identity from one that holds it, once the user saw
/// the same code on both.
enum DeviceLinking {
    /// On the new device: asks, shows the code (`shown`, as soon as another device offered),
    /// and waits for the approval.
    static func link(on client: SIMPClient, shown: @escaping @Sendable (RequestResult) -> Void) async throws(ClientError) -> RequestResult {
        let state = try await client.linkThisDevice { code in
            shown(RequestResult(human: "link code: \(code)\non a device that holds your identity: /device links, then /device approve NAME \(code) if it shows this code",
                                json: ["event": "link-code", "code": code]))
        }
        let human = state == .created ? "this is your first device: it made your identity (nothing to link)" : "linked: this device holds your identity"
        return RequestResult(human: human, json: ["event": "linked", "state": "\(state)"])
    }

    /// On a device holding the identity: the new devices asking, and their codes.
    static func links(on client: SIMPClient) async throws(ClientError) -> RequestResult {
        let links = try await client.pendingLinks()
        let lines = links.map { link in
            if link.offeredElsewhere { return "  \(link.device): being linked from another of your devices" }
            guard let code = link.code else { return "  \(link.device): no code yet (the new device has not answered)" }
            return "  \(link.device): code \(code)  (/device approve \(link.device) \(code) if the new device shows it)"
        }
        let human = links.isEmpty ? "no device is asking to be linked" : (["devices asking to be linked:"] + lines).joined(separator: "\n")
        let json: [[String: Any]] = links.map { link in
            var entry: [String: Any] = ["device": link.device, "offeredElsewhere": link.offeredElsewhere]
            if let code = link.code { entry["code"] = code }
            return entry
        }
        return RequestResult(human: human, json: ["event": "link-requests", "links": json])
    }

    static func approve(_ device: String, code: String, on client: SIMPClient) async throws(ClientError) -> RequestResult {
        try await client.approveLink(device: device, code: code)
        return RequestResult(human: "\(device) is linked: it now holds your identity", json: ["event": "link-approved", "device": device])
    }
}
