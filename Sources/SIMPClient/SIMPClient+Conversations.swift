import Foundation
import SIMPCore

/// End-to-end encrypted conversations (docs/E2EE.md, Part 4): the driver's side. The keys and
/// groups are `ConversationKeys`'; this carries messages to it and back.
extension SIMPClient {
    /// Whether a message to `recipient` (a user or a group) is sealed: with `endToEnd`.
    func sealsMessages(to recipient: String) -> Bool {
        configuration.endToEnd
    }

    /// A text to send to `recipient`: in parts when long, sealed when `sealsMessages(to:)`.
    nonisolated(nonsending) func madeText(_ text: String, to recipient: String) async throws(ClientError) -> Prepared {
        let sealing = sealsMessages(to: recipient)
        let made = try ClientEngine.text(text, to: recipient, limit: textLimit.value, at: Self.moment().millis,
                                         partBytes: sealing ? SealedText.partBytes : LongText.partBytes, random: random)
        return sealing ? try await sealed(made) : Prepared(made, nil)
    }

    /// A message made to send, and the write of the group state its sealing made (queued, not
    /// awaited): its outbox write rests on it (`queue`).
    typealias Prepared = (made: ClientEngine.Made, state: ClientStore.QueuedWrite?)

    /// `made` with its items sealed for their recipient; the whole (what the history keeps) stays
    /// as written.
    nonisolated(nonsending) func sealed(_ made: ClientEngine.Made) async throws(ClientError) -> Prepared {
        var sealed = made
        let state: ClientStore.QueuedWrite
        (sealed.items, state) = try await conversationKeys().sealQueued(made.items, to: made.whole.to, client: self)
        return (sealed, state)
    }

    /// This device's keys for encrypted conversations, once it has an identity
    /// (`setUpIdentity`). Made once for each device key (`saveKeys` lets go of the one made
    /// under an earlier key): one made from keys replaced meanwhile is not kept, and writes
    /// nothing (`ClientStore.keysGeneration`).
    func conversationKeys() async throws(ClientError) -> ConversationKeys {
        if let keys = keyring.withLock({ $0 }) { return keys }
        let store = try await identityStore()
        let device = try await currentDevice()
        guard let (own, generation) = try? store.ownKeysAndGeneration(), own.published else {
            throw ClientError("this device has no identity yet: setUpIdentity() first (end-to-end encryption needs one)",
                              code: .endToEnd)
        }
        let made = try ConversationKeys(store: store, user: store.user, device: device, keys: own, generation: generation,
                                        checkInterval: configuration.directoryCheckInterval)
        return keyring.withLock { kept in
            if let kept, kept.generation == store.keysGeneration.value { return kept }
            if generation == store.keysGeneration.value { kept = made }
            return made
        }
    }

    /// A received batch with sealed messages: opened (off the loop: it may fetch commits and
    /// Welcomes), then written as opened, resting on the group states the openings queued (in
    /// their commit when the writer has not taken them yet), then handed back to the engine. A batch that could not be opened for now (the
    /// server or its store out of reach), or whose write failed, goes back as a write that
    /// failed: neither shown nor confirmed, the server pushes it again.
    func openThenSave(_ batch: ReceivedSaves.Batch, in store: ClientStore) {
        Task { [self] in
            let keys = try? await conversationKeys()
            var opening: ConversationKeys.Opening?
            if let keys {
                do {
                    opening = try await keys.open(batch.messages, client: self)
                } catch {
                    let failure = StoreWriteError(path: store.path, ClientError("a sealed message could not be opened for now (\(error))"))
                    loop.execute { [self] in handle(.savedOpened(.failure(failure), [])) }
                    return
                }
            }
            let (written, writes) = (opening?.messages ?? batch.messages, opening?.writes)
            store.receive(written, savedUpTo: batch.upTo, after: writes?.queued) { [self] result in
                guard case .failure = result, let keys, let writes else {
                    return loop.execute { [self] in handle(.savedOpened(result, written)) }
                }
                // Forgotten before the engine hears of it: the batch pushed again opens from the disk.
                Task { [self] in
                    await keys.forget(writes)
                    loop.execute { [self] in handle(.savedOpened(result, written)) }
                }
            }
        }
    }
}
