import SIMPCore

/// A contact request, step by step: which record to change next (the user's or the peer's,
/// each in its own slot, `Scripts.contact`), which notice to store in whose inbox, and what the
/// user is answered. Pure: the control handler runs each step and feeds its result back.
///
/// A request touches both users' records, which may live on different Redis shards, so no
/// script can change both at once. The steps are ordered so that a node lost between two of
/// them leaves a state the next request repairs: the peer's side is written first when the
/// user asks (the user's "sent" follows), the user's first when it answers a request.
struct ContactFlow: Sendable {
    enum Step: String, Sendable {
        case ask, receive, sent, contact, accept, decline, remove, forget, block, unblock, list
    }

    /// What one step found and left: its status (`Scripts.contact`), then the records of the
    /// user it ran on and where that user's devices are.
    struct Result: Sendable, Equatable {
        var status: Int
        var contacts: [Simp_Contact]
        var blocked: [String]
        var nodes: [String]
    }

    enum Next: Sendable, Equatable {
        /// Run `step` on `owner`'s records, about `peer`.
        case run(Step, owner: String, peer: String)
        /// Store a notice of `type` from `from` in `to`'s inbox, then go on.
        case notify(Simp_Message.MessageType, from: String, to: String)
        /// The user blocked someone: its sessions (on these nodes) take nothing early from now on.
        case filtered(nodes: [String])
        case answer(Simp_ContactAnswer)
        case refuse(Simp_ErrorCode, String)
    }

    let action: Simp_ContactRequest.Action
    let user: String
    let peer: String
    /// What is left to do after the step running now.
    private var pending: [Next] = []
    /// The user had asked the peer before (its record says "sent"): the peer was told then.
    private var askedBefore = false

    init(_ request: Simp_ContactRequest, user: String) {
        action = request.action
        self.user = user
        peer = request.user
    }

    /// A request refused before anything runs.
    static func problem(in request: Simp_ContactRequest, from user: String) -> (Simp_ErrorCode, String)? {
        if case .UNRECOGNIZED(let value) = request.action { return (.badRequest, "unknown contact action \(value)") }
        if request.action == .list { return nil }
        guard UserName.isValid(request.user) else { return (.unknownUser, "no such user: \(request.user)") }
        if request.user == user { return (.badRequest, "that is you") }
        return nil
    }

    /// The first step.
    mutating func start() -> Next {
        let step: Step = switch action {
        case .add: .ask
        case .accept: .accept
        case .decline: .decline
        case .remove: .remove
        case .block: .block
        case .unblock: .unblock
        case .list, .UNRECOGNIZED: .list
        }
        return .run(step, owner: user, peer: action == .list ? "" : peer)
    }

    /// The step `step`, run on `owner`'s records, came back with `result`.
    mutating func finished(_ step: Step, owner: String, _ result: Result) -> Next {
        switch step {
        case .ask: return asked(result.status)
        case .receive: return received(result.status)
        case .accept:
            if result.status == 2 { return then([], answer: result) }
            guard result.status == 0 else { return .refuse(.badRequest, "\(peer) has not asked to be your contact") }
            return then([.run(.contact, owner: peer, peer: user), .notify(.contactAccepted, from: user, to: peer)], answer: result)
        case .decline, .remove:
            guard result.status == 0 else {
                return .refuse(.badRequest, step == .decline ? "\(peer) has not asked to be your contact" : "\(peer) is not among your contacts")
            }
            return then([.run(.forget, owner: peer, peer: user)], answer: result)
        case .unblock:
            guard result.status == 0 else { return .refuse(.badRequest, "\(peer) is not blocked") }
            return then([], answer: result)
        case .block:
            // A contact or a request ends on both sides, as a REMOVE would: the peer cannot
            // tell a block from a removal and contacts-only.
            let forget: [Next] = result.status == 1 ? [.run(.forget, owner: peer, peer: user)] : []
            return then(forget + [.filtered(nodes: result.nodes)], answer: result)
        case .contact where owner == peer && result.status == -1:
            // The peer blocked the user: its side stays as it is, and it is told nothing.
            pending.removeAll { if case .notify = $0 { true } else { false } }
            return next()
        case .sent where result.status == 3:
            // The peer asked the user meanwhile: both asked, so they are contacts (and the
            // peer is told that, not of a request).
            pending.removeAll { if case .notify = $0 { true } else { false } }
            return then([.run(.contact, owner: peer, peer: user), .notify(.contactAccepted, from: user, to: peer)], answer: result)
        case .sent, .contact, .forget, .list:
            // The user's own records answer; a step on the peer's only moves on.
            return owner == user ? then([], answer: result) : next()
        }
    }

    /// The notice or the filter change was carried out.
    mutating func next() -> Next {
        pending.isEmpty ? .refuse(.internal, "contact request ended without an answer") : pending.removeFirst()
    }

    private mutating func asked(_ status: Int) -> Next {
        switch status {
        case -1: return .refuse(.badRequest, "you blocked \(peer); unblock them first")
        case -2: return .refuse(.rateLimited, "too many contact requests; try again later")
        // The peer had asked the user: asking back is accepting.
        case 1: return .run(.accept, owner: user, peer: peer)
        // Asked before, or contacts already on this side: the peer's side is asked again, which
        // repairs it if a lost node left it without the request (or the contact).
        default:
            askedBefore = status == 3
            return .run(.receive, owner: peer, peer: user)
        }
    }

    private mutating func received(_ status: Int) -> Next {
        switch status {
        case -3: return .refuse(.unknownUser, "no such user: \(peer)")
        // Blocked: recorded as sent on the user's side, nothing told to the peer.
        case 0: return .run(.sent, owner: user, peer: peer)
        // The peer has the request; told already unless the user's side had lost it.
        case 4 where askedBefore: return .run(.sent, owner: user, peer: peer)
        case 1, 4:
            pending = [.notify(.contactRequest, from: user, to: peer)]
            return .run(.sent, owner: user, peer: peer)
        case 3:
            pending = [.notify(.contactAccepted, from: user, to: peer)]
            return .run(.contact, owner: user, peer: peer)
        default: return .run(.contact, owner: user, peer: peer)
        }
    }

    /// Steps still to run before the answer, then the answer from `result` (the user's records).
    private mutating func then(_ steps: [Next], answer result: Result) -> Next {
        pending += steps + [.answer(Self.answer(result))]
        return pending.removeFirst()
    }

    /// The notice `notify` asks for, as a store into `to`'s inbox; `id` and the time are the driver's.
    static func notice(_ type: Simp_Message.MessageType, from: String, to: String, id: UInt64, nowMillis: Int64) -> StoreRequest {
        StoreRequest.notice(type, from: from, to: to, owner: to, id: id, nowMillis: nowMillis)
    }

    static func answer(_ result: Result) -> Simp_ContactAnswer {
        var answer = Simp_ContactAnswer()
        answer.contacts = result.contacts.sorted { $0.name < $1.name }
        answer.blocked = result.blocked.sorted()
        return answer
    }
}
