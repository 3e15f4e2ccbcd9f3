import SIMPChaos
import SIMPCore
import Testing

@Suite struct LongTextTests {
    // MARK: split

    @Test func asciiIsCutExactlyAtThePartSize() {
        #expect(LongText.split("").isEmpty)
        #expect(LongText.split("a") == ["a"])
        for (size, sizes) in [(960, [960]), (961, [960, 1]), (1920, [960, 960]), (1921, [960, 960, 1])] {
            let text = String(repeating: "a", count: size)
            let parts = LongText.split(text)
            #expect(parts.map(\.utf8.count) == sizes, "\(size) bytes")
            #expect(parts.joined() == text)
        }
    }

    @Test func aTwoByteCharacterIsNeverCut() {
        // 959 bytes of ASCII, then "é" (2 bytes) would straddle byte 960: it goes to the next part.
        let text = String(repeating: "a", count: 959) + "é" + "b"
        let parts = LongText.split(text)
        #expect(parts.map(\.utf8.count) == [959, 3])
        #expect(parts == [String(repeating: "a", count: 959), "éb"])
        // Only "é": 480 of them fill a part exactly.
        let accents = String(repeating: "é", count: 481)
        #expect(LongText.split(accents) == [String(repeating: "é", count: 480), "é"])
    }

    @Test func aFourByteEmojiIsNeverCut() {
        for offset in 0..<4 {
            // The emoji starts 1-4 bytes before the part's end: it stays whole on one side.
            let text = String(repeating: "a", count: 956 + offset) + "😀" + "z"
            let parts = LongText.split(text)
            #expect(parts.joined() == text)
            #expect(parts.count == 2)
            #expect(parts.allSatisfy { $0.utf8.count <= LongText.partBytes })
            #expect(parts[0].utf8.count >= LongText.fullPartBytes)
            #expect(parts.contains { $0.contains("😀") }, "offset \(offset)")
        }
        // Emoji only: 240 fill a part.
        let emoji = String(repeating: "😀", count: 241)
        #expect(LongText.split(emoji) == [String(repeating: "😀", count: 240), "😀"])
    }

    @Test func theWorstCutStillFillsAPartToTheLeastSize() {
        // 957 bytes of ASCII and a 4-byte character that would end at byte 961: the part ends at 957.
        let text = String(repeating: "a", count: 957) + "😀"
        let parts = LongText.split(text)
        #expect(parts.map(\.utf8.count) == [957, 4])
        #expect(LongText.fullPartBytes == 957)
    }

    @Test func randomTextsSplitIntoValidPartsThatJoinToTheText() {
        var random = SplitMix64(seed: 0x10_27)
        // One scalar of each UTF-8 length, from a few ranges of each.
        let scalars: [[ClosedRange<UInt32>]] = [
            [0x20...0x7E, 0x0A...0x0A],
            [0xA0...0x7FF],
            [0x800...0xD7FF, 0xE000...0xFFFD],
            [0x1_0000...0x1_FFFF, 0x2_0000...0x10_FFFF],
        ]
        for round in 0..<300 {
            let length = Int(random.next() % 5_000)
            var text = String.UnicodeScalarView()
            // Some texts lean to one width, so cuts fall at every offset within a character.
            let bias = Int(random.next() % 5)
            for _ in 0..<length {
                let width = bias < 4 && random.next() % 2 == 0 ? bias : Int(random.next() % 4)
                let ranges = scalars[width]
                let range = ranges[Int(random.next() % UInt64(ranges.count))]
                let value = range.lowerBound + UInt32(random.next() % UInt64(range.upperBound - range.lowerBound + 1))
                text.append(Unicode.Scalar(value)!)
            }
            let whole = String(text)
            let parts = LongText.split(whole)
            #expect(parts.joined() == whole, "round \(round)")
            #expect(parts.reduce(0) { $0 + $1.utf8.count } == whole.utf8.count, "round \(round)")
            #expect(parts.allSatisfy { !$0.isEmpty && $0.utf8.count <= LongText.partBytes }, "round \(round)")
            #expect(parts.dropLast().allSatisfy { $0.utf8.count >= LongText.fullPartBytes }, "round \(round)")
            #expect(parts.count <= LongText.maxParts(forMaxBytes: max(1, whole.utf8.count)), "round \(round)")
            // Each part is whole scalars: its scalars joined are exactly the text's, in order.
            #expect(parts.flatMap(\.unicodeScalars) == Array(whole.unicodeScalars), "round \(round)")
            // Decoding a part's bytes again changes nothing (no replacement characters).
            for part in parts {
                #expect(String(validating: Array(part.utf8), as: UTF8.self) == part, "round \(round)")
            }
        }
    }

    // MARK: PartID

    @Test func aPartIDIsParsed() {
        let part = LongText.PartID("12345/2/3")
        #expect(part == LongText.PartID(base: "12345", index: 2, count: 3))
        #expect(part?.isLast == false)
        #expect(LongText.PartID("12345/3/3")?.isLast == true)
        #expect(LongText.PartID("12345/1/2") == LongText.PartID(base: "12345", index: 1, count: 2))
    }

    @Test func aBaseMayContainASlash() {
        #expect(LongText.PartID("a/b/1/2") == LongText.PartID(base: "a/b", index: 1, count: 2))
        #expect(LongText.PartID("a//1/2") == LongText.PartID(base: "a/", index: 1, count: 2))
    }

    @Test func idsOutsideTheFormAreNotParts() {
        for id in ["12345", "12345/1", "12345/0/3", "12345/4/3", "12345/-1/3", "12345/1/1", "12345/1/0",
                   "12345/x/3", "12345/1/y", "12345/1/", "12345//3", "/1/2", "", "/", "//", "a/b/c",
                   "12345/1/99999999999999999999"] {
            #expect(LongText.PartID(id) == nil, "\(id)")
        }
    }

    @Test func aPartIDRoundTripsThroughItsDescription() {
        for part in [LongText.PartID(base: "18446744073709551615", index: 69, count: 69),
                     LongText.PartID(base: "1", index: 1, count: 2),
                     LongText.PartID(base: "a/b", index: 3, count: 7)] {
            #expect(LongText.PartID(part.description) == part)
        }
        #expect(LongText.PartID(base: "7", index: 2, count: 5).description == "7/2/5")
    }

    @Test func onlyTheLastPartShowsTheWholesID() {
        #expect(LongText.shownID(of: "12345") == "12345")
        #expect(LongText.shownID(of: "12345/3/3") == "12345")
        #expect(LongText.shownID(of: "12345/1/3") == nil)
        #expect(LongText.shownID(of: "12345/2/3") == nil)
        // An id with slashes that is not a part's is its own.
        #expect(LongText.shownID(of: "a/b") == "a/b")
        #expect(LongText.shownID(of: "12345/4/3") == "12345/4/3")
        #expect(LongText.shownID(of: "12345/1/1") == "12345/1/1")
    }

    // MARK: maxParts

    @Test func theDefaultLimitAllowsSixtyNineParts() {
        #expect(LongText.maxParts(forMaxBytes: LongText.defaultMaxBytes) == 69)
        #expect(LongText.maxParts(forMaxBytes: 65_536) == 69)
        // The worst split of 65,536 bytes: every part cut 3 bytes short.
        #expect(68 * LongText.fullPartBytes < 65_536 && 65_536 <= 69 * LongText.fullPartBytes)
    }

    /// A part but the last holds at least 957 bytes: a limit within that allows no long
    /// message, and each 957 more allows one part more.
    @Test func aLimitWithinOnePartAllowsNoLongMessage() {
        for limit in [0, 1, 100, 957] {
            #expect(LongText.maxParts(forMaxBytes: limit) == 1, "\(limit)")
        }
        for limit in [958, 960, 1_000, 1_914] {
            #expect(LongText.maxParts(forMaxBytes: limit) == 2, "\(limit)")
        }
        #expect(LongText.maxParts(forMaxBytes: 1_915) == 3)
    }

    @Test func noTextWithinTheLimitSplitsIntoMorePartsThanAllowed() {
        // The worst case: 4-byte characters placed so every cut falls 3 bytes short.
        // Each part would end inside an emoji, so it ends 3 bytes short, at 957.
        let text = String(repeating: "😀" + String(repeating: "a", count: 953), count: 68) + String(repeating: "a", count: 460)
        #expect(text.utf8.count == LongText.defaultMaxBytes)
        let parts = LongText.split(text)
        #expect(parts.prefix(67).allSatisfy { $0.utf8.count == LongText.fullPartBytes })
        #expect(parts.count == 69)
        #expect(parts.count <= LongText.maxParts(forMaxBytes: LongText.defaultMaxBytes))
    }

    // MARK: MessageRules

    private static func message(_ type: Simp_Message.MessageType, id: String, content: String, to: String = "bob") -> Simp_Message {
        var message = Simp_Message()
        message.version = 1
        message.messageID = id
        message.toUser = to
        message.type = type
        message.content = content
        return message
    }

    @Test func aTextOverTheLimitIsTooLarge() {
        let text = Self.message(.text, id: "1", content: String(repeating: "x", count: 1_001))
        let problem = MessageRules.problem(in: text, maxTextBytes: 1_000)
        #expect(problem?.code == .messageTooLarge)
        #expect(problem?.reason == "text of 1001 bytes is over the limit of 1000")
        #expect(MessageRules.problem(in: Self.message(.text, id: "1", content: String(repeating: "x", count: 1_000)),
                                     maxTextBytes: 1_000) == nil)
        let long = Self.message(.text, id: "1", content: String(repeating: "x", count: LongText.defaultMaxBytes + 1))
        #expect(MessageRules.problem(in: long)?.code == .messageTooLarge)
        #expect(MessageRules.problem(in: long)?.reason == "text of 65537 bytes is over the limit of 65536")
    }

    @Test func aPartWithABadIDIsABadRequest() {
        for id in ["12345", "12345/0/3", "12345/4/3", "12345/1/1", "/1/2", "12345/a/3"] {
            let part = Self.message(.textPart, id: id, content: "hello")
            #expect(MessageRules.problem(in: part)?.code == .badRequest, "\(id)")
            #expect(MessageRules.problem(in: part)?.reason
                == "a TEXT_PART's messageId must be <id>/<index>/<count> with 1 <= index <= count and count >= 2", "\(id)")
        }
    }

    @Test func aPartOfTooManyPartsIsTooLarge() {
        let part = Self.message(.textPart, id: "12345/1/70", content: "hello")
        #expect(MessageRules.problem(in: part)?.code == .messageTooLarge)
        #expect(MessageRules.problem(in: part)?.reason
            == "a message of 70 parts is over the limit of 65536 bytes (at most 69 parts)")
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/69/69", content: "hello")) == nil)
        // A server with a lower limit allows fewer parts.
        let small = Self.message(.textPart, id: "12345/1/3", content: "hello")
        #expect(MessageRules.problem(in: small, maxTextBytes: 1_000)?.code == .messageTooLarge)
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/2/2", content: "hello"), maxTextBytes: 1_000) == nil)
        // Within one part's worth, no long message at all.
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/2/2", content: "hello"), maxTextBytes: 500)?.code
            == .messageTooLarge)
    }

    /// Every part before holds at least 957 bytes, so the text up to this part's end is at
    /// least (index - 1) * 957 + its size: over the limit, refused.
    @Test func aPartThatMustEndPastTheLimitIsTooLarge() {
        let full = String(repeating: "x", count: LongText.fullPartBytes)
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "1/2/2", content: "x"), maxTextBytes: 958) == nil)
        let over = MessageRules.problem(in: Self.message(.textPart, id: "1/2/2", content: "xy"), maxTextBytes: 958)
        #expect(over?.code == .messageTooLarge)
        #expect(over?.reason == "a message with part 2 of 2 bytes is over the limit of 958 bytes")
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "1/1/2", content: full), maxTextBytes: 958) == nil)
    }

    @Test func aPartButTheLastHoldsAtLeastAFullPart() {
        let short = MessageRules.problem(in: Self.message(.textPart, id: "12345/1/2", content: String(repeating: "x", count: 956)))
        #expect(short?.code == .badRequest)
        #expect(short?.reason == "every part but the last holds at least 957 bytes, not 956")
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/2/2", content: "x")) == nil)
    }

    @Test func aPartIDMustBeWrittenPlainly() {
        for id in ["5/+1/2", "5/01/2", "5/1/02", "5/1/+2"] {
            #expect(LongText.PartID(id) == nil, "\(id)")
        }
    }

    @Test func aPartMustHoldOneToNineHundredSixtyBytes() {
        let empty = Self.message(.textPart, id: "12345/1/2", content: "")
        #expect(MessageRules.problem(in: empty)?.code == .badRequest)
        #expect(MessageRules.problem(in: empty)?.reason == "a part holds 1-960 bytes of text, not 0")
        let over = Self.message(.textPart, id: "12345/1/2", content: String(repeating: "x", count: 961))
        #expect(MessageRules.problem(in: over)?.code == .badRequest)
        #expect(MessageRules.problem(in: over)?.reason == "a part holds 1-960 bytes of text, not 961")
        // Bytes count, not characters: 481 "é" are 962 bytes.
        let accents = Self.message(.textPart, id: "12345/1/2", content: String(repeating: "é", count: 481))
        #expect(MessageRules.problem(in: accents)?.code == .badRequest)
    }

    @Test func aValidPartIsAccepted() {
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/2/2", content: "x")) == nil)
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/1/2", content: String(repeating: "x", count: 960))) == nil)
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "a/b/2/2", content: "x")) == nil)
        #expect(MessageRules.problem(in: Self.message(.textPart, id: "12345/2/2", content: "x", to: "#team")) == nil)
    }

    @Test func theLargestPartAClientSendsFitsTheMessageLimit() throws {
        let longestName = String(repeating: "u", count: 32)
        #expect(UserName.isValid(longestName))
        #expect(!UserName.isValid(longestName + "u"))
        #expect(GroupName.isValid(longestName))
        #expect(!GroupName.isValid(longestName + "u"))
        // The client's ids are decimal UInt64s: at most 20 digits.
        let id = LongText.PartID(base: String(UInt64.max), index: 69, count: 69).description
        #expect(id.utf8.count == 26)
        for to in [longestName, GroupName.address(longestName)] {
            var message = Self.message(.textPart, id: id, content: String(repeating: "x", count: LongText.partBytes), to: to)
            // The longest time: a negative int64 is a 10-byte varint.
            message.time = Int64.min
            message.clientSeq = UInt64.max
            message.fresh = true
            message.overtaken = true
            #expect(MessageRules.problem(in: message, maxTextBytes: 69 * LongText.partBytes) == nil, "\(to)")
            let bytes: [UInt8] = try message.serializedBytes()
            let size = bytes.count
            #expect(size <= MessageRules.maxMessageBytes, "\(to): \(size) bytes, limit \(MessageRules.maxMessageBytes)")
        }
    }
}
