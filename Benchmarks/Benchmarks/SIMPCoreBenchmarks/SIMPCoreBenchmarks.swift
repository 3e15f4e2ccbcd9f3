import Benchmark
import NIOCore
import SIMPCore
import SIMPRedis

/// The per-message work of the engine without I/O, with allocation counts: what one
/// message costs in each codec, and what a store or ack batch costs to encode and decode.
let benchmarks: @Sendable () -> Void = {
    // A thousand iterations per sample, so the harness' own bookkeeping between samples
    // does not count; figures are per iteration.
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock, .mallocCountTotal, .throughput],
                                           scalingFactor: .kilo, maxDuration: .seconds(2))

    Benchmark("Message encode + decode (64-byte text)") { benchmark in
        let message = Fixtures.message
        for _ in benchmark.scaledIterations {
            let bytes: [UInt8] = try message.serializedBytes()
            blackHole(try Simp_Message(serializedBytes: bytes))
        }
    }

    Benchmark("Frame encode + parse (accepted notice)") { benchmark in
        var accepted = Simp_Accepted()
        accepted.messageID = "1780938443771233423"
        accepted.toUser = "bob"
        accepted.seq = 12345
        let envelope = Simp_Envelope(.accepted(accepted))
        var parser = FrameParser()
        for _ in benchmark.scaledIterations {
            var frame = Frame.encode(envelope)
            parser.append(&frame)
            blackHole(try parser.next())
        }
    }

    Benchmark("Datagram seal + open (64-byte text)") { benchmark in
        let key = DatagramSeal.newKey()
        let payload: [UInt8] = try Fixtures.message.serializedBytes()
        var number: UInt64 = 0
        for _ in benchmark.scaledIterations {
            number += 1
            let header = DatagramHeader(kind: .data, sessionID: 42, packetNumber: number)
            var sealed = try DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer)
            let decoded = try Datagram.decodeHeader(&sealed)
            blackHole(try DatagramSeal.open(decoded, sealed: sealed, key: key, direction: .toServer))
        }
    }

    Benchmark("Store batch: 64 messages to 8 recipients, RESP encode") { benchmark in
        let script = RedisScript("return 1")
        let payload: [UInt8] = try Fixtures.message.serializedBytes()
        for _ in benchmark.scaledIterations {
            var buffer = ByteBuffer()
            for recipient in 0..<8 {
                var keys: [any RedisArgument] = ["simp:user:r\(recipient)", "simp:seq:r\(recipient)",
                                                 "simp:inbox:r\(recipient)", "simp:acked:r\(recipient)"]
                var args: [any RedisArgument] = [86_400, 1000, 10_000]
                for message in 0..<8 {
                    keys += ["simp:mid:s\(recipient):\(message)", "simp:hist:r\(recipient):s\(recipient)"]
                    args.append(payload)
                }
                let command = RedisCommand.script(script, keys: keys, args: args)
                RedisWire.encode([Array("EVALSHA".utf8), Array(script.sha.utf8)] + command.arguments, into: &buffer)
            }
            blackHole(buffer)
        }
    }

    Benchmark("Store batch: 8 replies of 8 outcomes, RESP decode") { benchmark in
        let wire = Fixtures.storeReplies
        for _ in benchmark.scaledIterations {
            let reader = RedisReplyReader()
            try reader.feed(wire)
            var count = 0
            while let reply = try reader.next() { count += reply.array?.count ?? 0 }
            blackHole(count)
        }
    }

    Benchmark("Ack reply: 32 confirmed entries, decode + parse") { benchmark in
        let wire = Fixtures.ackReply
        for _ in benchmark.scaledIterations {
            let reader = RedisReplyReader()
            try reader.feed(wire)
            let items = try reader.next()?.array ?? []
            for item in items {
                guard let bytes = item.bytes else { continue }
                let message = try Simp_Message(serializedBytes: bytes)
                blackHole((message.fromUser, message.messageID, message.seq))
            }
        }
    }

    Benchmark("Stored bytes: seq appended") { benchmark in
        let payload: [UInt8] = try Fixtures.message.serializedBytes()
        var seq: UInt64 = 1_000_000
        for _ in benchmark.scaledIterations {
            seq += 1
            blackHole(StoredMessage.appending(seq: seq, to: payload))
        }
    }
}

enum Fixtures {
    static var message: Simp_Message {
        var message = Simp_Message()
        message.version = 1
        message.type = .text
        message.messageID = "1780938443771233423"
        message.fromUser = "alice"
        message.toUser = "bob"
        message.time = 1_795_000_000_000
        message.content = String(repeating: "x", count: 64)
        return message
    }

    /// What the store script returns for a batch: per recipient an array of {1, seq}.
    static var storeReplies: ByteBuffer {
        var text = ""
        for recipient in 0..<8 {
            text += "*8\r\n"
            for message in 0..<8 { text += "*2\r\n:1\r\n:\(recipient * 1000 + message)\r\n" }
        }
        return ByteBuffer(string: text)
    }

    /// What the ack script returns: the confirmed inbox entries' bytes.
    static var ackReply: ByteBuffer {
        var buffer = ByteBuffer(string: "*32\r\n")
        for seq in 1...32 {
            var message = message
            message.seq = UInt64(seq)
            let bytes: [UInt8] = (try? message.serializedBytes()) ?? []
            buffer.writeString("$\(bytes.count)\r\n")
            buffer.writeBytes(bytes)
            buffer.writeString("\r\n")
        }
        return buffer
    }
}
