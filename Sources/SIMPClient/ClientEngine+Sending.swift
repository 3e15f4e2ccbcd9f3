import Foundation
import NIOCore
import SIMPCore

/// Sending: messages into the uplink, datagrams out, and the timers that resend, bind,
/// query and keep the path alive.
extension ClientEngine {
    mutating func send(_ items: [Outgoing], now: Moment) {
        for item in items {
            let id = item.message.messageID
            if let numbered = sending.send(item, id: id, now: now.deadline, bound: lifecycle.isBound) {
                transmit(numbered, .first, now: now)
            }
            armTick(at: now.deadline + ClientTimers.fastTick, now: now.deadline)
        }
    }

    /// A TYPING datagram, if the session is bound: plain, or with its MLS message (`sealed`).
    mutating func typing(to peer: String, sealed: [UInt8]? = nil) {
        guard lifecycle.isBound else { return }
        sendDatagram(.typing, SealedSignals.TypingBody(user: peer, sealed: sealed).bytes)
    }

    /// Messages wait in the uplink; what its window and pacing let go leaves at the end of the
    /// loop turn, together in bundles when the server takes them.
    mutating func transmit(_ message: Simp_Message, _ reason: Uplink.Reason, now: Moment) {
        guard let payload: [UInt8] = try? message.serializedBytes() else { return }
        uplink.send(message.messageID, payload, now: now.deadline, reason: reason)
        if uplink.windowed { sending.waiting(message.messageID) }
        atTurnEnd(.flush)
    }

    private mutating func sendDatagram(_ kind: DatagramKind, _ payload: [UInt8], via path: DatagramPath? = nil) {
        writeDatagram(kind, payload, via: path)
        atTurnEnd(.flush)
    }

    /// Sealed under the session's key, numbered in its order (one order for both paths), on
    /// `path`, or the session's when nil. Inside the control connection it is a frame of its
    /// own, written at once.
    private mutating func writeDatagram(_ kind: DatagramKind, _ payload: [UInt8], via path: DatagramPath? = nil) {
        guard let session, let key = sessionKey else { return }
        let header = DatagramHeader(kind: kind, sessionID: session.sessionID, packetNumber: nextPacketNumber)
        nextPacketNumber += 1
        guard let sealed = try? DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer,
                                                  allocator: ByteBufferAllocator()) else { return }
        if (path ?? (paths.onStream ? .stream : .udp)) == .stream {
            actions.append(.sendControl(Simp_Envelope(.datagram(Data(sealed.readableBytesView)))))
        } else {
            actions.append(.writeDatagram(sealed))
        }
    }

    mutating func turnEnded(_ end: TurnEnd, now: Moment) {
        let due = turnEnds.remove(end) != nil
        switch end {
        case .flush:
            writeUnsent(now: now)
            actions.append(.flushDatagrams)
        case .receipt:
            // Not when it went already, ahead of a read mark (`requestSent`).
            if due { sendReceipt() }
        }
    }

    /// What the window and the pacing let go; the rest waits for an acknowledgement or the
    /// pacing's next moment.
    private mutating func writeUnsent(now: Moment) {
        guard uplink.hasQueued else { return }
        let release = uplink.release(now: now.deadline, bundles: session?.bundles == true)
        // The stream loses nothing: what leaves on it has no retransmit timer (only the
        // give-up one), and waits for the server's answer.
        for id in release.ids {
            if paths.onStream { sending.waiting(id) } else { sending.left(id, now: now.deadline) }
        }
        for datagram in release.datagrams { writeDatagram(datagram.kind, datagram.payload) }
        guard !releaseScheduled, let next = uplink.nextRelease(now: now.deadline) else { return }
        releaseScheduled = true
        actions.append(.releaseAt(next))
    }

    mutating func releaseDue() {
        releaseScheduled = false
        atTurnEnd(.flush)
    }

    /// The server answered for a message: the window has room for what waits.
    mutating func acknowledged(_ id: String, now: Moment) {
        uplink.acknowledged(id, now: now.deadline)
        if uplink.hasQueued { atTurnEnd(.flush) }
    }

    // MARK: the timer

    /// An answer from the server may bring the next resend closer (it ends a probe's wait, and
    /// what is still pending runs from now): the tick follows, as it is armed no later than
    /// the next resend can fall due.
    mutating func followResends(now: Moment) {
        guard sending.awaitsAcceptance else { return }
        armTick(at: max(now.deadline + ClientTimers.fastTick, sending.resendsFrom), now: now.deadline)
    }

    mutating func tick(now: Moment) {
        sending.stalled(timers.stall(firedAt: now.deadline))
        timers.fired()
        let due = timers.due(waits, now: now.deadline)
        if due.resend {
            let resends = sending.resends(now: now.deadline, bound: lifecycle.isBound)
            // Timeouts on UDP with no answer between them: UDP is lost, the stream is asked for.
            if lifecycle.isBound, !resends.transmit.isEmpty, paths.udpTimedOut(now: now.deadline) { askForStream() }
            perform(resends, .timeout, now: now)
        }
        // Held back by a policer far below the stream's rate: the stream is asked for.
        if lifecycle.isBound, uplink.throttled, paths.udpThrottled() { askForStream() }
        if due.bind { sendBind(now: now.deadline) }
        if paths.streamBindDue(now: now.deadline) { sendBindOverStream() }
        if paths.udpProbeDue(now: now.deadline) { probeUDP() }
        if due.deliveryQuery { queryDeliveries(now: now.deadline) }
        if due.gapReport {
            let unsaved = waits.unsaved
            reportGap(now: now.deadline)
            if unsaved { timers.unsavedAskedFor() }
        }
        if due.keepalive { sendKeepalive(now: now) }
        // Bound only: a stand-in needs the server (fetched commits, claims), and a duty taken
        // while reconnecting would fail and be gone; it waits for the session instead.
        let bound = lifecycle.isBound
        if bound { for duty in deputies.take(now: now.deadline) { actions.append(.commitKeys(of: duty.peer, in: duty.conversation)) } }
        let next = min(timers.nextTick(waits, now: now.deadline, resendsFrom: sending.resendsFrom), paths.nextDeadline ?? .distantFuture)
        armTick(at: min(next, bound ? deputies.next ?? .distantFuture : .distantFuture), now: now.deadline)
    }

    private var waits: ClientTimers.Waits {
        ClientTimers.Waits(path: session == nil ? .closed : lifecycle.isBound ? .bound : .binding,
                           acceptance: sending.awaitsAcceptance,
                           delivery: sending.awaitsDelivery,
                           gap: sequencer.bufferedCount > 0, unsaved: sequencer.hasGap && sequencer.bufferedCount == 0,
                           queued: uplink.hasQueued)
    }

    mutating func perform(_ resends: SendTracker.Resends, _ reason: Uplink.Reason, now: Moment) {
        for due in resends.transmit { transmit(due.payload.message, reason, now: now) }
        for withdraw in resends.withdraw {
            uplink.forget(withdraw.messageID)
            sendControl(.withdraw(withdraw))
        }
    }

    mutating func sendBind(now: NIODeadline) {
        guard let session, !lifecycle.isBound else { return }
        timers.bindSent(at: now)
        sendDatagram(.bind, Array(session.bindToken), via: .udp)
    }

    /// The BIND inside the control connection: UDP has not answered in time.
    private mutating func sendBindOverStream() {
        guard let session, !lifecycle.isBound else { return }
        sendDatagram(.bind, Array(session.bindToken), via: .stream)
    }

    /// On UDP, gone quiet: an empty BIND inside the control connection asks the server to move
    /// the session to the stream (its `bound` with an empty address says it did). Empty, so
    /// that it differs from the race's BIND, which may arrive after UDP won.
    private mutating func askForStream() {
        guard session != nil else { return }
        sendDatagram(.bind, [], via: .stream)
    }

    /// On the stream: a BIND over UDP. The server challenges the address it came from, and
    /// moves the session to UDP once the challenge is answered (its `bound` names the address).
    private mutating func probeUDP() {
        guard let session else { return }
        sendDatagram(.bind, Array(session.bindToken), via: .udp)
    }

    /// A new datagram socket, after a network change: on UDP a keepalive makes the server
    /// validate the new address; on the stream UDP is probed at once (`PathChoice`).
    mutating func udpReplaced(now: Moment) {
        paths.networkChanged(now: now.deadline)
        if paths.udpProbeDue(now: now.deadline) { probeUDP() }
        armTick(at: paths.nextDeadline ?? .distantFuture, now: now.deadline)
        sendKeepalive(now: now)
    }

    /// A keepalive holds a NAT mapping: on the stream there is none to hold (the probes do).
    mutating func sendKeepalive(now: Moment) {
        timers.keepaliveSent(at: now.deadline)
        guard !paths.onStream else { return }
        sendDatagram(.keepalive, [])
    }

    mutating func sendPing() {
        var ping = Simp_Ping()
        ping.nonce = random()
        sendControl(.ping(ping))
    }
}
