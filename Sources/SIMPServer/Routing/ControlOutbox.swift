import NIOCore
import SIMPCore

/// Envelopes the router sends on control connections, gathered over one loop tick and written
/// with one hop and one flush per connection: under load a sender gets its accepted and
/// delivered notices for a whole store batch in one syscall instead of one each.
/// Confined to the router's loop; a connection's envelopes keep their order.
final class ControlOutbox {
    private let loop: any EventLoop
    private var pending: [ObjectIdentifier: (channel: any Channel, envelopes: [Simp_Envelope])] = [:]
    private var drainScheduled = false

    init(loop: any EventLoop) {
        self.loop = loop
    }

    func send(_ envelope: Simp_Envelope, on channel: any Channel) {
        pending[ObjectIdentifier(channel), default: (channel, [])].envelopes.append(envelope)
        guard !drainScheduled else { return }
        drainScheduled = true
        let bound = NIOLoopBound(self, eventLoop: loop)
        loop.execute { bound.value.drain() }
    }

    private func drain() {
        drainScheduled = false
        let batches = pending.values
        pending.removeAll(keepingCapacity: true)
        for (channel, envelopes) in batches {
            guard channel.eventLoop.inEventLoop else {
                channel.eventLoop.execute { Self.write(envelopes, on: channel) }
                continue
            }
            Self.write(envelopes, on: channel)
        }
    }

    /// Framed into one buffer by the connection's handler. A connection without one is
    /// closing: what it was sent would go nowhere.
    private static func write(_ envelopes: [Simp_Envelope], on channel: any Channel) {
        guard let handler = try? channel.pipeline.syncOperations.handler(type: ControlHandler.self),
              let context = handler.framing.context else { return }
        handler.sendAll(context, envelopes)
    }
}
