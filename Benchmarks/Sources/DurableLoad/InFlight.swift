import MQTTLoad

/// One pair's messages in flight and its figures. As in MQTTLoad, a slot is freed once the
/// broker has acknowledged the message (publisher confirm, PubAck) and the receiver has it:
/// W bounds both the unconfirmed and the undelivered messages. Not thread-safe; the owner
/// serializes access.
struct InFlight {
    private struct Slot {
        let sentAt: UInt64
        var acked = false
        var received = false
    }

    /// What an ack or a delivery did to the pair.
    enum Outcome: Equatable {
        case freedSlot
        /// The other half (the delivery, or the ack) is still to come.
        case waiting
        /// Already had it: the broker sent it twice.
        case duplicate
        /// A counter never sent.
        case unknown
    }

    let clock: LoadClock
    let window: Int
    private(set) var result = MQTTLoadResult()
    private var slots: [UInt64: Slot] = [:]
    private var lastCounter: UInt64 = 0

    init(clock: LoadClock, window: Int) {
        self.clock = clock
        self.window = window
        slots.reserveCapacity(window)
    }

    /// A free slot while the measured window lasts.
    func canSend(at now: UInt64) -> Bool {
        slots.count < window && now < clock.measureUntil
    }

    /// Everything sent has settled after the window, or the drain is over.
    func isFinished(at now: UInt64) -> Bool {
        (now >= clock.measureUntil && slots.isEmpty) || now >= clock.drainUntil
    }

    /// The next counter, 1 up, in flight from `now`.
    mutating func send(at now: UInt64) -> UInt64 {
        lastCounter += 1
        slots[lastCounter] = Slot(sentAt: now)
        result.sent += 1
        return lastCounter
    }

    /// The broker has stored `counter`.
    mutating func acked(_ counter: UInt64, at now: UInt64) -> Outcome {
        guard var slot = slots[counter], !slot.acked else { return counter >= 1 && counter <= lastCounter ? .duplicate : .unknown }
        if clock.measured(slot.sentAt) { _ = result.sendToAck.record((now - min(now, slot.sentAt)) / 1000) }
        slot.acked = true
        return settle(counter, slot)
    }

    /// RabbitMQ's multiple ack: every counter up to `last` not acked yet. How many slots that freed.
    mutating func acked(through last: UInt64, at now: UInt64) -> Int {
        let counters = slots.filter { $0.key <= last && !$0.value.acked }.keys
        return counters.reduce(0) { freed, counter in freed + (acked(counter, at: now) == .freedSlot ? 1 : 0) }
    }

    mutating func received(_ counter: UInt64, sentAt: UInt64, at now: UInt64) -> Outcome {
        guard var slot = slots[counter], !slot.received else {
            // Settled or already received: the broker sent it twice.
            guard counter >= 1 && counter <= lastCounter else { return .unknown }
            result.duplicates += 1
            return .duplicate
        }
        if clock.measured(sentAt) { _ = result.sendToReceive.record((now - min(now, sentAt)) / 1000) }
        result.received += 1
        slot.received = true
        return settle(counter, slot)
    }

    mutating func note(_ error: String) {
        result.note(error)
    }

    /// The figures with what never arrived counted as lost.
    func finished() -> MQTTLoadResult {
        var final = result
        final.lost = slots.values.count { !$0.received }
        return final
    }

    private mutating func settle(_ counter: UInt64, _ slot: Slot) -> Outcome {
        guard slot.acked && slot.received else {
            slots[counter] = slot
            return .waiting
        }
        slots[counter] = nil
        return .freedSlot
    }
}
