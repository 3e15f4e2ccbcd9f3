import SIMPCore

/// What the messages of one datagram (a bundle carries several) come to, decided purely: the
/// ones handed over now, in order and once; whether a repeat must be answered with a receipt;
/// whether a gap opened. `SIMPClient` carries it out.
struct ReceivedBatch {
    /// Ready to hand over (or to save first), in order.
    var ready: [IncomingMessage] = []
    /// The delivered mark before them.
    var before: UInt64 = 0
    /// A message came again that was delivered already: its receipt was lost, so one goes now.
    var repeated = false
    /// A message came ahead of a missing one: the gap is reported.
    var gap = false
    /// The delivered mark moved: what it passed is confirmed (and saved first, with a store),
    /// even when none of it is shown.
    var advanced = false

    /// `user` and `device`: who this client is. The copy of what this device sent, kept for the
    /// user's other devices, is confirmed here and not shown: the application has it already.
    /// The numbered copy of a message handed over early is confirmed with the rest, not again.
    static func take(_ payloads: [[UInt8]], sequencer: inout InboundSequencer<IncomingMessage>, early: inout EarlyLedger,
                     user: String?, device: String) -> ReceivedBatch {
        var batch = ReceivedBatch(before: sequencer.deliveredUpTo)
        for payload in payloads {
            guard let message = try? Simp_Message(serializedBytes: payload), message.seq > 0 else { continue }
            switch sequencer.receive(seq: message.seq, item: IncomingMessage(message)) {
            case .deliver(let items): batch.ready += items
            case .duplicate: batch.repeated = true
            case .buffered: batch.gap = true
            case .dropped: break
            }
        }
        batch.advanced = !batch.ready.isEmpty
        if early.count > 0 { batch.ready.removeAll { early.numbered(.init(from: $0.from, id: $0.id)) } }
        batch.ready.removeAll { $0.fromDevice == device && $0.from == user }
        return batch
    }

}
