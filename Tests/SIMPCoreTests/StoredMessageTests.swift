import SIMPCore
import Testing

@Suite struct StoredMessageTests {
    @Test(arguments: [UInt64(0), 1, 127, 128, 300, 16_383, 16_384, UInt64.max])
    func theAppendedSeqWinsWhenParsed(seq: UInt64) throws {
        var message = Simp_Message()
        message.content = "hi"
        message.seq = 99
        let stored = StoredMessage.appending(seq: seq, to: try message.serializedBytes())
        #expect(try Simp_Message(serializedBytes: stored).seq == seq)
        #expect(try Simp_Message(serializedBytes: stored).content == "hi")
    }
}
