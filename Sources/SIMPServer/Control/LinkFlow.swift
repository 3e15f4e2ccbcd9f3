import Foundation
import SIMPCore

/// A device-linking request (docs/E2EE.md, "Linking a device"), step by step: the server keeps
/// one record per new device of a user and relays its steps between the user's devices. It
/// checks the steps' order and who takes each; the bodies are the devices' (`DeviceLink`), only
/// bounded here. The worker carries each step out; the time is the request's, passed in.
struct LinkFlow: Sendable, Equatable {
    /// How long a link is kept after its request: long enough to walk to the other device.
    static let keptMillis: Int64 = 600_000
    static let maxBodyBytes = 256

    enum Request: Sendable, Equatable {
        case step(Simp_LinkStepKind, device: String, body: [UInt8])
        case fetch(device: String?)
    }

    enum Next: Sendable, Equatable {
        /// Run the step's script (`Scripts.linkStep`); comes back as `stepped(_:)`.
        case step(user: String, device: String, kind: Simp_LinkStepKind, sender: String, body: [UInt8], nowMillis: Int64, keptMillis: Int64)
        /// Read the user's links; comes back as `fetched(_:)`.
        case fetch(user: String)
        case answer(Simp_Envelope.OneOf_Body)
        case refuse(Simp_ErrorCode, String)
    }

    /// What the step's script answered.
    enum Stepped: Sendable, Equatable {
        case done
        /// No link of that device is kept (never requested, or expired).
        case noLink
        /// The link is not at the step before this one (or it was declined).
        case outOfOrder
        /// The sender is not the device that offered.
        case notOfferer
    }

    let request: Request
    let user: String
    /// The device the request came from (the login's).
    let device: String
    let nowMillis: Int64

    /// The request as the flow takes it, or why it is refused before anything runs: the kind,
    /// names, body sizes, and the steps only the new device (or only another) may take.
    static func request(from body: Simp_Envelope.OneOf_Body, device sender: String) -> Result<Request, FlowRefusal>? {
        switch body {
        case .linkStep(let step):
            let device = step.kind == .linkRequest && step.device.isEmpty ? sender : step.device
            guard DeviceName.isValid(device) else { return .failure(.init(.badRequest, "not a device name: \(device.prefix(32))")) }
            let body = Array(step.body)
            switch step.kind {
            case .linkRequest, .linkReveal:
                guard device == sender else {
                    return .failure(.init(.linkStep, "only the new device (\(device)) takes this step of its link; this is \(sender)"))
                }
            case .linkOffer:
                guard device != sender else { return .failure(.init(.linkStep, "a device cannot offer to link itself")) }
            case .linkGrant, .linkDecline: break
            case .linkStepNone, .UNRECOGNIZED: return .failure(.init(.badRequest, "a link step names its kind"))
            }
            if step.kind == .linkDecline {
                guard body.isEmpty else { return .failure(.init(.badRequest, "a decline has no body")) }
            } else {
                guard !body.isEmpty, body.count <= maxBodyBytes else { return .failure(.init(.badRequest, "a link step's body is 1-\(maxBodyBytes) bytes")) }
            }
            return .success(.step(step.kind, device: device, body: body))
        case .linkFetch(let fetch):
            guard fetch.device.isEmpty || DeviceName.isValid(fetch.device) else {
                return .failure(.init(.badRequest, "not a device name: \(fetch.device.prefix(32))"))
            }
            return .success(.fetch(device: fetch.device.isEmpty ? nil : fetch.device))
        default: return nil
        }
    }

    func start() -> Next {
        switch request {
        case .step(let kind, let device, let body):
            .step(user: user, device: device, kind: kind, sender: self.device, body: body, nowMillis: nowMillis, keptMillis: Self.keptMillis)
        case .fetch: .fetch(user: user)
        }
    }

    func stepped(_ result: Stepped) -> Next {
        guard case .step(let kind, let device, _) = request else { return .refuse(.internal, "not a link step") }
        switch result {
        case .done: return .answer(.ok(Simp_Ok()))
        case .noLink: return .refuse(.linkStep, "no link of \(device) is kept (none requested, or it expired): request it again from \(device)")
        case .outOfOrder: return .refuse(.linkStep, "\(Self.name(kind)) does not follow the last step of \(device)'s link (or the link was declined)")
        case .notOfferer: return .refuse(.linkStep, "only the device that offered (or \(device) itself) takes this step")
        }
    }

    /// The user's links as stored (field "DEVICE\0PART"), those not expired, by device.
    func fetched(_ fields: [String: [UInt8]]) -> Next {
        guard case .fetch(let only) = request else { return .refuse(.internal, "not a link fetch") }
        var records: [String: Simp_LinkRecord] = [:]
        for (field, value) in fields {
            let parts = field.split(separator: "\0", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { continue }
            let device = String(parts[0])
            if let only, device != only { continue }
            var record = records[device] ?? Simp_LinkRecord()
            record.device = device
            switch parts[1] {
            case "request": record.request = Data(value)
            case "by": record.offeredBy = String(decoding: value, as: UTF8.self)
            case "offer": record.offer = Data(value)
            case "reveal": record.reveal = Data(value)
            case "grant": record.grant = Data(value)
            case "declined": record.declined = true
            case "expires": record.expiresAt = Int64(String(decoding: value, as: UTF8.self)) ?? 0
            default: continue
            }
            records[device] = record
        }
        var answer = Simp_LinkRecords()
        answer.links = records.values.filter { $0.expiresAt > nowMillis && !$0.request.isEmpty }.sorted { $0.device < $1.device }
        return .answer(.linkRecords(answer))
    }

    static func name(_ kind: Simp_LinkStepKind) -> String {
        switch kind {
        case .linkRequest: "a request"
        case .linkOffer: "an offer"
        case .linkReveal: "a reveal"
        case .linkGrant: "a grant"
        case .linkDecline: "a decline"
        default: "that step"
        }
    }
}
