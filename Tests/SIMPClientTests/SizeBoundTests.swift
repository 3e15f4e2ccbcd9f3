import SIMPCore
import Testing

@testable import SIMPClient

@Suite struct SizeBoundTests {
    /// The bound is never below the real size, whatever the strings and with every scalar at
    /// its widest, so skipping the serialization below it can never let an oversize message out.
    @Test func theBoundIsNeverBelowTheSerializedSize() throws {
        for length in stride(from: 0, through: 1_400, by: 7) {
            var message = Simp_Message()
            message.version = Int32.min
            message.messageID = String(UInt64.max)
            message.time = Int64.min
            message.content = String(repeating: "é", count: length / 2) + String(repeating: "x", count: length % 2)
            message.imageURL = length % 3 == 0 ? "https://example.com/" + String(repeating: "i", count: length / 3) : ""
            message.fromUser = "someone-with-a-long-name"
            message.toUser = "another-long-user-name"
            message.type = .receipt
            message.imageScale = -1.5
            message.seq = UInt64.max
            message.serverTime = Int64.min
            message.clientSeq = UInt64.max
            let size = try (message.serializedBytes() as [UInt8]).count
            #expect(size <= ClientEngine.sizeBound(message), "length \(length)")
        }
    }
}
