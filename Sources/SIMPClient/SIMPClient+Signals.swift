import SIMPCore

/// Read receipts and typing of encrypted conversations (docs/E2EE.md, Part 7): the driver's
/// side. What form each takes and what is taken are `SignalRules`' (pure); the groups are
/// `ConversationKeys`'; this carries them between the two and the engine.
extension SIMPClient {
    /// Tells `peer` (its devices that are connected) that the user is typing to it: one TYPING
    /// datagram, never stored nor resent, dropped when not connected. Send it again every few
    /// seconds while the user types. With `endToEnd`, sealed in the conversation's MLS group when
    /// this device holds it, and then never in the clear (not at all if it cannot be sealed).
    public func sendTyping(to peer: String) throws(ClientError) {
        guard UserName.isValid(peer) else { throw ClientError("not a valid user name: \(peer)", code: .badRequest) }
        guard configuration.endToEnd else { return loop.execute { [self] in typing(to: peer) } }
        Task { [self] in
            let form = if let keys = try? await conversationKeys() {
                await keys.typingForm(to: peer, client: self)
            } else {
                SignalRules.typingForm(endToEnd: true, encrypted: false, sealed: nil)
            }
            switch form {
            case .plain: loop.execute { [self] in handle(.typing(to: peer)) }
            case .sealed(let bytes): loop.execute { [self] in handle(.typing(to: peer, sealed: bytes)) }
            case .none: break
            }
        }
    }

    /// A TYPING that came to an encrypting client: judged by the conversation's keys (off the
    /// loop: a group not yet loaded is read from disk), then back to the engine.
    func checkTyping(_ body: SealedSignals.TypingBody) {
        Task { [self] in
            let verdict = if let keys = try? await conversationKeys() {
                await keys.typingVerdict(body, client: self)
            } else {
                SignalRules.typingVerdict(body, encrypted: false, opened: nil)
            }
            loop.execute { [self] in handle(.typingChecked(from: body.user, verdict)) }
        }
    }

    /// `user`'s key directory changed, the server says (a KEYS datagram): the conversations with
    /// that user follow the directory now (`ConversationKeys.keysChanged`), off the loop.
    func checkKeys(of user: String) {
        Task { [self] in
            guard let keys = try? await conversationKeys() else { return }
            let duties = await keys.keysChanged(of: user, client: self)
            guard !duties.isEmpty else { return }
            loop.execute { [self] in handle(.keysDeputies(duties)) }
        }
    }

    /// A deputy's duty fell due (`KeysDeputies`): the group commits the hint unless the device
    /// chosen for it did, off the loop.
    func commitKeys(of user: String, in conversation: String) {
        Task { [self] in
            guard let keys = try? await conversationKeys() else { return }
            await keys.standIn(about: user, in: conversation, client: self)
        }
    }

    /// Tells read marks: in `markRead` requests, and with `endToEnd` those of conversations
    /// (one-to-one or a group's) this device holds an MLS group for as sealed read receipts
    /// (`SEALED_READ`) to their senders (`SignalRules.route`; a group's to `SENDER#NAME`, sealed
    /// in the group's MLS group), only if the user has read receipts on (the server applies the
    /// setting to `markRead`; to a sealed read, this device does, and the server the
    /// recipient's). Sealed reads go like messages, silently: no events. Each is sealed as a
    /// message is, so it counts towards the device's next Update in that group.
    func tellReads(_ marks: [Simp_ReadMark]) async throws(ClientError) {
        var routed = SignalRules.Routed(plain: marks)
        var keys: ConversationKeys?
        if configuration.endToEnd, let found = try? await conversationKeys() {
            keys = found
            routed = SignalRules.route(marks, endToEnd: true, encrypted: await found.encryptedConversations())
        }
        // A refused markRead (say E2E_REQUIRED) does not hold back the sealed ones: thrown after them.
        var refused: ClientError?
        for start in stride(from: 0, to: routed.plain.count, by: 256) where refused == nil {
            var request = Simp_ReadRequest()
            request.reads = Array(routed.plain[start..<min(start + 256, routed.plain.count)])
            refused = await markRead(request)
        }
        if let keys, !routed.sealed.isEmpty, (try? await settings())?.readReceipts == true {
            for (peer, ids) in routed.sealed {
                let made = try ClientEngine.message(ClientEngine.plain(ids.joined(separator: " "), type: .read), to: peer,
                                                    at: Self.moment().millis, random: random)
                let address = SealedSignals.ReadAddress(peer) ?? SealedSignals.ReadAddress(sender: peer)
                // Tracked as a message to the sender: it goes to the sender's inbox, and the
                // server's answers name the sender (`toUser` keeps `SENDER#NAME`).
                let items = made.items.map { Outgoing(to: address.sender, message: $0.message) }
                let sealed = try await keys.seal(items, to: address.conversation, client: self)
                loop.execute { [self] in handle(.sendSilently(sealed)) }
            }
        }
        if let refused { throw refused }
    }

    /// One `markRead` request; its refusal, if any.
    private func markRead(_ request: Simp_ReadRequest) async -> ClientError? {
        do {
            _ = try await ask(.markRead(request), "a read request") { body in
                if case .ok? = body { () } else { nil }
            }
            return nil
        } catch {
            return error
        }
    }
}
