import NIOCore
import SIMPCore

/// Which source address a session's datagrams are accepted from. The first is proven by the
/// single-use bind token; a later one (the client's NAT mapping or socket changed, or someone
/// on the path rewrote the source) is challenged, and only the session's own control connection
/// can answer. Until it does, that address gets nothing but challenges, within three times the
/// bytes it sent. The session may instead be bound to its control connection (the stream path:
/// UDP does not work for it); a UDP address is then taken only through a challenge too.
/// Pure: the caller supplies the time and the challenge tokens.
struct PathValidator {
    /// Where the session's datagrams go.
    enum Route: Equatable {
        case udp(SocketAddress)
        /// Inside the session's control connection (docs/PROTOCOL.md, section 2, The stream path).
        case stream
    }

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
        /// A BIND on the stream while on UDP: the session moved to the stream.
        case movedToStream
    }

    static let challengeInterval = TimeAmount.milliseconds(200)

    private(set) var route: Route?
    private var bindToken: [UInt8]
    private var pending: PathChallenge?

    init(bindToken: [UInt8]) {
        self.bindToken = bindToken
    }

    /// The validated UDP address; nil before the bind and while the path is the stream.
    var address: SocketAddress? {
        guard case .udp(let address) = route else { return nil }
        return address
    }

    var isBound: Bool { route != nil }
    var onStream: Bool { route == .stream }

    mutating func bind(token: [UInt8], from source: SocketAddress) -> BindResult {
        if let route { return route == .udp(source) ? .answerAgain : .ignored }
        guard takeBindToken(token) else { return .badToken }
        route = .udp(source)
        return .bound
    }

    /// A BIND that came inside the session's own control connection: before the bind, its
    /// token binds the session to the stream. Once bound it is a path check, answered (the
    /// race's BIND, sent before the client heard UDP won, carries the token), except that on UDP
    /// an empty one is the client's word that UDP went quiet (it opened under the session key,
    /// on the session's own connection): the session moves to the stream.
    mutating func bindOverStream(token: [UInt8]) -> BindResult {
        if route == .stream { return .answerAgain }
        if route != nil {
            guard token.isEmpty else { return .answerAgain }
            leaveUDP()
            return .movedToStream
        }
        guard takeBindToken(token) else { return .badToken }
        route = .stream
        return .bound
    }

    /// UDP is lost: the session's datagrams go inside its control connection from now on; a
    /// UDP address is taken again only through a challenge.
    mutating func leaveUDP() {
        route = .stream
        pending = nil
    }

    private mutating func takeBindToken(_ token: [UInt8]) -> Bool {
        guard !bindToken.isEmpty, constantTimeEqual(token, bindToken) else { return false }
        bindToken = []
        return true
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
        route = .udp(pending.address)
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
