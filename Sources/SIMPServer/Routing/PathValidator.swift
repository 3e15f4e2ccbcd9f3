import NIOCore
import SIMPCore

/// Which source address a session's datagrams are accepted from. The first is proven by the
/// single-use bind token; a later one (the client's NAT mapping or socket changed, or someone
/// on the path rewrote the source) is challenged, and only the session's own control connection
/// can answer. Until it does, that address gets nothing but challenges, within three times the
/// bytes it sent. Pure: the caller supplies the time and the challenge tokens.
struct PathValidator {
    enum Verdict: Equatable {
        case accept
        case drop(DropReason)
        /// Dropped, and the new address is to be sent this challenge token.
        case challenge(token: [UInt8], to: SocketAddress)
    }

    enum BindResult: Equatable {
        /// The token matched: the address is the session's; answer, register presence, sync.
        case bound
        /// A bind from the validated address once bound, whatever its token (it opened under
        /// the session key: it is the client's own): a path check, or our answer was missed.
        case answerAgain
        /// The token is wrong (the datagram opened under the session key, so it is the client's
        /// own mistake and its control connection may be told).
        case badToken
        case ignored
    }

    static let challengeInterval = TimeAmount.milliseconds(200)

    private(set) var address: SocketAddress?
    private var bindToken: [UInt8]
    private var pending: PathChallenge?

    init(bindToken: [UInt8]) {
        self.bindToken = bindToken
    }

    var isBound: Bool { address != nil }

    mutating func bind(token: [UInt8], from source: SocketAddress) -> BindResult {
        if let address { return address == source ? .answerAgain : .ignored }
        guard !bindToken.isEmpty, constantTimeEqual(token, bindToken) else { return .badToken }
        bindToken = []
        address = source
        return .bound
    }

    /// Whether a datagram of `size` bytes from `source` may be acted on.
    mutating func check(_ source: SocketAddress, size: Int, now: NIODeadline, newToken: () -> [UInt8]) -> Verdict {
        if source == address { return .accept }
        guard isBound else { return .drop(.unvalidatedAddress) }
        if pending?.address != source { pending = PathChallenge(address: source, token: newToken()) }
        pending!.budget.receive(size)
        guard now - pending!.sentAt >= Self.challengeInterval else { return .drop(.unvalidatedAddress) }
        let token = pending!.token
        guard pending!.budget.spend(DatagramHeader.size + token.count + DatagramSeal.tagSize) else { return .drop(.amplification) }
        pending!.sentAt = now
        return .challenge(token: token, to: source)
    }

    /// The control connection returned a challenge token: on a match the challenged address
    /// becomes the session's, and is returned.
    mutating func respond(token: [UInt8]) -> SocketAddress? {
        guard let pending, constantTimeEqual(token, pending.token) else { return nil }
        self.pending = nil
        address = pending.address
        return pending.address
    }
}

/// An unvalidated source address of a session, the token it is challenged with, and what it
/// may still be sent.
struct PathChallenge {
    let address: SocketAddress
    let token: [UInt8]
    var sentAt: NIODeadline = .distantPast
    var budget = AmplificationBudget()
}
