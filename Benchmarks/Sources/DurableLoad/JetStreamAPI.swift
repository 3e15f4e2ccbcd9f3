import Foundation
import NIOCore

/// The JetStream requests a run makes and the replies it reads (JSON over NATS).
enum JetStreamAPI {
    /// One stream per pair: file storage, one replica; a work queue, so that an acked message
    /// is removed, as RabbitMQ removes it from its queue.
    static func createStream(_ stream: String, subject: String) -> (subject: String, body: ByteBuffer) {
        let config = StreamConfig(name: stream, subjects: [subject], storage: "file", retention: "workqueue", numReplicas: 1)
        return ("$JS.API.STREAM.CREATE.\(stream)", encoded(config))
    }

    /// A durable push consumer delivering to `deliverSubject`; each message waits for its ack.
    static func createConsumer(_ stream: String, durable: String, deliverSubject: String,
                               maxAckPending: Int) -> (subject: String, body: ByteBuffer) {
        let config = ConsumerConfig(durableName: durable, deliverSubject: deliverSubject, ackPolicy: "explicit",
                                    deliverPolicy: "all", maxAckPending: maxAckPending, ackWait: 30_000_000_000)
        let request = ConsumerRequest(streamName: stream, config: config)
        return ("$JS.API.CONSUMER.DURABLE.CREATE.\(stream).\(durable)", encoded(request))
    }

    static func deleteStream(_ stream: String) -> (subject: String, body: ByteBuffer) {
        ("$JS.API.STREAM.DELETE.\(stream)", ByteBuffer())
    }

    /// An API reply or a PubAck: fails with JetStream's description when it carries an error.
    static func reply(_ payload: ByteBuffer) throws(DurableLoadError) -> Reply {
        let reply: Reply
        do {
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            reply = try decoder.decode(Reply.self, from: Data(payload.readableBytesView))
        } catch {
            throw .protocolError("JetStream replied with something other than its JSON: \(String(buffer: payload).prefix(200))")
        }
        if let error = reply.error {
            throw .protocolError("JetStream: \(error.description ?? "error") (code \(error.code ?? 0), \(error.errCode ?? 0))")
        }
        return reply
    }

    /// A PubAck: the message is stored as `seq` in `stream`.
    static func pubAck(_ payload: ByteBuffer) throws(DurableLoadError) -> (stream: String, seq: UInt64) {
        let reply = try reply(payload)
        guard let stream = reply.stream, let seq = reply.seq else {
            throw .protocolError("a PubAck without stream and seq: \(String(buffer: payload).prefix(200))")
        }
        return (stream, seq)
    }

    struct Reply: Decodable {
        var error: APIError?
        var stream: String?
        var seq: UInt64?
        var duplicate: Bool?
    }

    /// JetStream's names, in snake case on the wire.
    struct APIError: Decodable {
        var code: Int?
        var errCode: Int?
        var description: String?
    }

    private struct StreamConfig: Encodable {
        var name: String
        var subjects: [String]
        var storage: String
        var retention: String
        var numReplicas: Int
    }

    private struct ConsumerConfig: Encodable {
        var durableName: String
        var deliverSubject: String
        var ackPolicy: String
        var deliverPolicy: String
        var maxAckPending: Int
        /// Nanoseconds: far longer than a run's messages wait, so nothing is redelivered unless an ack is lost.
        var ackWait: Int
    }

    private struct ConsumerRequest: Encodable {
        var streamName: String
        var config: ConsumerConfig
    }

    private static func encoded(_ value: some Encodable) -> ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.keyEncodingStrategy = .convertToSnakeCase
        // Every value here is a plain string or number: encoding cannot fail.
        return ByteBuffer(bytes: (try? encoder.encode(value)) ?? Data())
    }
}
