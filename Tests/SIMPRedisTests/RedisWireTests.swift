import NIOCore
@testable import SIMPRedis
import Testing

@Suite struct RedisWireTests {
    @Test func commandsAreEncodedAsRESPArraysOfBulkStrings() {
        var buffer = ByteBuffer()
        RedisWire.encode([Array("SET".utf8), Array("k".utf8), [0, 0x0D, 0x0A], []], into: &buffer)
        let expected: [UInt8] = Array("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\n".utf8) + [0, 0x0D, 0x0A] + Array("\r\n$0\r\n\r\n".utf8)
        #expect(Array(buffer.readableBytesView) == expected)
    }

    /// Every reply kind, split at every byte boundary: each reply comes out once, whole, in order.
    @Test func repliesSplitAtAnyByteDecodeOnceInOrder() throws {
        let wire = Array("+OK\r\n-ERR bad\r\n:42\r\n$3\r\na\r\n\r\n$-1\r\n*2\r\n:1\r\n$1\r\nx\r\n*0\r\n".utf8)
        let expected: [RedisValue] = [.status("OK"), .error("ERR bad"), .integer(42), .bulk([0x61, 0x0D, 0x0A]), .null,
                                      .array([.integer(1), .bulk([0x78])]), .array([])]
        for cut in 0...wire.count {
            let reader = RedisReplyReader()
            var replies: [RedisValue] = []
            for part in [wire[..<cut], wire[cut...]] {
                try reader.feed(ByteBuffer(bytes: part))
                while let reply = try reader.next() { replies.append(reply) }
            }
            #expect(replies == expected, "split at \(cut)")
        }
    }

    @Test func aProtocolErrorIsTypedAndSaysWhy() throws {
        let reader = RedisReplyReader()
        try reader.feed(ByteBuffer(string: "?what\r\n"))
        #expect(throws: RedisError.self) { _ = try reader.next() }
    }

    @Test func scriptsAreNamedByTheirSHA1() {
        // SHA-1 of "return 1", as Redis' SCRIPT LOAD answers it.
        #expect(RedisScript("return 1").sha == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    }
}
