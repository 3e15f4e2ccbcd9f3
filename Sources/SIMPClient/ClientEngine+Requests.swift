import SIMPCore

/// The requests on the control connection waiting for their answer: which are, and what
/// becomes of each (its answer, the request timeout, its caller's cancellation, the loss of
/// the connection). The driver numbers them and holds the callers' promises; the engine
/// decides when one is over (`Action.answer`) and forgets it then: a later answer is
/// nobody's and is dropped.
extension ClientEngine {
    /// The request numbered `id` is written on the control connection after these actions. A
    /// read mark never leaves before the receipt that confirms what it marks: the server tells
    /// a read only of a message the session confirmed (docs/PROTOCOL.md, Read receipts), and
    /// the application may mark a message the moment it is handed over, before the turn's end
    /// sends its receipt. So the receipt due at the turn's end goes now, ahead of the mark on
    /// the same stream (the turn's end then has nothing left to send).
    mutating func requestSent(_ id: UInt64, marksRead: Bool = false) {
        pendingRequests.insert(id)
        if marksRead, turnEnds.remove(.receipt) != nil { sendReceipt() }
    }

    /// An envelope answering request `envelope.requestID` (not 0): its caller's, unless the
    /// request is over already.
    mutating func answered(_ envelope: Simp_Envelope) {
        guard pendingRequests.remove(envelope.requestID) != nil else { return }
        guard case .error(let error) = envelope.body else { return actions.append(.answer(envelope.requestID, .success(envelope))) }
        actions.append(.answer(envelope.requestID, .failure(.server(error))))
    }

    /// The request is over without its answer: `failure` is what its caller gets.
    mutating func requestEnded(_ id: UInt64, _ failure: ClientError) {
        guard pendingRequests.remove(id) != nil else { return }
        actions.append(.answer(id, .failure(failure)))
    }

    /// The control connection is lost (`why`): no request on it will be answered.
    mutating func requestsLost(_ why: String) {
        for id in pendingRequests.sorted() { actions.append(.answer(id, .failure(ClientError(why)))) }
        pendingRequests.removeAll()
    }
}
