#if canImport(Glibc)
import Glibc
#endif
import CRabbitMQ

/// One blocking librabbitmq connection, logged in as guest with channel 1 open. librabbitmq
/// is not thread-safe: one thread creates, uses and closes it.
final class AMQPConnection {
    static let channel: amqp_channel_t = 1
    /// RabbitMQ's largest; a bigger message goes out as several body frames.
    static let frameMax: Int32 = 131_072

    /// What the broker sent a publisher.
    enum Event: Equatable {
        case ack(UInt64, multiple: Bool)
        case nack(UInt64, multiple: Bool)
        case other
    }

    struct Delivery {
        let tag: UInt64
        let counter: UInt64
        let sentAt: UInt64
    }

    private let state: amqp_connection_state_t
    private var open = true

    /// Connects, logs in and opens channel 1; each step at most `timeout` seconds.
    init(host: String, port: Int, timeout: Double = 10) throws(DurableLoadError) {
        guard let state = amqp_new_connection() else { throw .connectionFailed("librabbitmq: out of memory") }
        self.state = state
        do {
            try connect(host, port, timeout)
            try check(crabbitmq_login_plain(state, "/", Self.frameMax, "guest", "guest"), "login to \(host):\(port)")
            amqp_channel_open(state, Self.channel)
            try check(amqp_get_rpc_reply(state), "channel.open")
        } catch {
            amqp_destroy_connection(state)
            open = false
            throw error
        }
    }

    deinit { close() }

    private func connect(_ host: String, _ port: Int, _ timeout: Double) throws(DurableLoadError) {
        guard let socket = amqp_tcp_socket_new(state) else { throw .connectionFailed("librabbitmq: no socket") }
        var limit = Self.timeval(timeout)
        let status = amqp_socket_open_noblock(socket, host, Int32(port), &limit)
        guard status == AMQP_STATUS_OK.rawValue else {
            throw .connectionFailed("cannot connect to \(host):\(port): \(Self.describe(status))")
        }
        // Without a limit an RPC to a broker that stopped answering would block its thread for ever.
        amqp_set_rpc_timeout(state, &limit)
    }

    /// Best effort: the broker may be gone already.
    func close() {
        guard open else { return }
        open = false
        amqp_channel_close(state, Self.channel, AMQP_REPLY_SUCCESS)
        amqp_connection_close(state, AMQP_REPLY_SUCCESS)
        amqp_destroy_connection(state)
    }

    var socket: Int32 { amqp_get_sockfd(state) }

    // MARK: Setup

    /// Durable, not exclusive, not deleted when unused: it outlives its connections, as the pattern's queue should.
    func declareQueue(_ name: String) throws(DurableLoadError) {
        _ = name.withCString { amqp_queue_declare(state, Self.channel, amqp_cstring_bytes($0), 0, 1, 0, 0, amqp_table_t()) }
        try check(amqp_get_rpc_reply(state), "queue.declare \(name)")
    }

    func deleteQueue(_ name: String) throws(DurableLoadError) {
        _ = name.withCString { amqp_queue_delete(state, Self.channel, amqp_cstring_bytes($0), 0, 0) }
        try check(amqp_get_rpc_reply(state), "queue.delete \(name)")
    }

    /// Publisher confirms: the broker acks each publish once it has taken responsibility for it.
    func selectConfirms() throws(DurableLoadError) {
        amqp_confirm_select(state, Self.channel)
        try check(amqp_get_rpc_reply(state), "confirm.select")
    }

    func setPrefetch(_ count: Int) throws(DurableLoadError) {
        amqp_basic_qos(state, Self.channel, 0, UInt16(min(count, Int(UInt16.max))), 0)
        try check(amqp_get_rpc_reply(state), "basic.qos")
    }

    /// Manual acks (no_ack false): the broker keeps a message until ack(_:).
    func consume(_ queue: String) throws(DurableLoadError) {
        _ = queue.withCString { amqp_basic_consume(state, Self.channel, amqp_cstring_bytes($0), amqp_bytes_t(), 0, 0, 0, amqp_table_t()) }
        try check(amqp_get_rpc_reply(state), "basic.consume \(queue)")
    }

    // MARK: The load

    /// Persistent (delivery mode 2) through the default exchange to `queue`.
    func publish(_ queue: String, _ body: UnsafeRawBufferPointer) throws(DurableLoadError) {
        var properties = amqp_basic_properties_t()
        properties._flags = amqp_flags_t(AMQP_BASIC_DELIVERY_MODE_FLAG)
        properties.delivery_mode = UInt8(AMQP_DELIVERY_PERSISTENT.rawValue)
        let bytes = amqp_bytes_t(len: body.count, bytes: UnsafeMutableRawPointer(mutating: body.baseAddress))
        let status = queue.withCString {
            amqp_basic_publish(state, Self.channel, amqp_bytes_t(), amqp_cstring_bytes($0), 0, 0, &properties, bytes)
        }
        guard status == AMQP_STATUS_OK.rawValue else { throw .connectionFailed("basic.publish: \(Self.describe(status))") }
    }

    func ack(_ tag: UInt64) throws(DurableLoadError) {
        let status = amqp_basic_ack(state, Self.channel, tag, 0)
        guard status == AMQP_STATUS_OK.rawValue else { throw .connectionFailed("basic.ack: \(Self.describe(status))") }
    }

    /// The next frame for a publisher, nil if none came within `timeout` seconds (0: only
    /// what is buffered or already on the socket).
    func nextEvent(timeout: Double) throws(DurableLoadError) -> Event? {
        // Frees what earlier frames took (only once none is queued); the library keeps it until asked.
        amqp_maybe_release_buffers(state)
        var frame = amqp_frame_t()
        var limit = Self.timeval(timeout)
        let status = amqp_simple_wait_frame_noblock(state, &frame, &limit)
        if status == AMQP_STATUS_TIMEOUT.rawValue { return nil }
        guard status == AMQP_STATUS_OK.rawValue else { throw .connectionFailed("reading a frame: \(Self.describe(status))") }
        return try event(frame)
    }

    private func event(_ frame: amqp_frame_t) throws(DurableLoadError) -> Event {
        guard frame.frame_type == AMQP_FRAME_METHOD else { return .other }
        let method = frame.payload.method
        switch method.id {
        case crabbitmq_basic_ack():
            let ack = method.decoded.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
            return .ack(ack.delivery_tag, multiple: ack.multiple != 0)
        case crabbitmq_basic_nack():
            let nack = method.decoded.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
            return .nack(nack.delivery_tag, multiple: nack.multiple != 0)
        case crabbitmq_channel_close(), crabbitmq_connection_close():
            throw .protocolError("the broker closed the \(method.id == crabbitmq_channel_close() ? "channel" : "connection"): \(Self.describe(method))")
        default:
            return .other
        }
    }

    /// The next message for a consumer, nil if none came within `timeout` seconds.
    func nextDelivery(timeout: Double) throws(DurableLoadError) -> Delivery? {
        // Frees what the previous message's frames took; the library keeps it until asked.
        amqp_maybe_release_buffers(state)
        var envelope = amqp_envelope_t()
        var limit = Self.timeval(timeout)
        let reply = amqp_consume_message(state, &envelope, &limit, 0)
        if reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT.rawValue { return nil }
        if reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_UNEXPECTED_STATE.rawValue {
            // Not a delivery: a method frame comes next, which ends the run if it closes the channel.
            _ = try nextEvent(timeout: timeout)
            return nil
        }
        try check(reply, "consuming")
        defer { amqp_destroy_envelope(&envelope) }
        let body = UnsafeRawBufferPointer(start: envelope.message.body.bytes, count: envelope.message.body.len)
        guard let (counter, sentAt) = LoadMessage.read(body) else {
            throw .protocolError("a message of \(body.count) bytes, too short for a counter and a send time")
        }
        return Delivery(tag: envelope.delivery_tag, counter: counter, sentAt: sentAt)
    }

    // MARK: Errors

    private func check(_ reply: amqp_rpc_reply_t, _ what: String) throws(DurableLoadError) {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            throw .connectionFailed("\(what): \(Self.describe(reply.library_error))")
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            throw .protocolError("\(what): \(Self.describe(reply.reply))")
        default:
            throw .protocolError("\(what): no reply")
        }
    }

    static func describe(_ status: Int32) -> String {
        String(cString: amqp_error_string2(status))
    }

    /// The code and text of a channel.close or connection.close.
    static func describe(_ method: amqp_method_t) -> String {
        switch method.id {
        case crabbitmq_channel_close():
            let close = method.decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            return "\(close.reply_code) \(text(close.reply_text))"
        case crabbitmq_connection_close():
            let close = method.decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            return "\(close.reply_code) \(text(close.reply_text))"
        default:
            return "method 0x\(String(method.id, radix: 16))"
        }
    }

    private static func text(_ bytes: amqp_bytes_t) -> String {
        String(decoding: UnsafeRawBufferPointer(start: bytes.bytes, count: bytes.len), as: UTF8.self)
    }

    static func timeval(_ seconds: Double) -> Glibc.timeval {
        Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
    }
}
