import NIOCore
import SIMPCore
import Testing

@Suite struct FrameParserTests {
    func ping(_ nonce: UInt64) -> Simp_Envelope {
        var p = Simp_Ping()
        p.nonce = nonce
        return Simp_Envelope(requestID: nonce, .ping(p))
    }

    func bytes(_ envelope: Simp_Envelope) -> [UInt8] {
        Array(Frame.encode(envelope).readableBytesView)
    }

    @Test func wholeFrameDecodes() throws {
        var parser = FrameParser()
        parser.append(contentsOf: bytes(ping(7)))
        #expect(try parser.next() == ping(7))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedBytes == 0)
    }

    @Test func frameSplitIntoSingleBytesDecodesOnce() throws {
        var parser = FrameParser()
        let frame = bytes(ping(42))
        for (i, byte) in frame.enumerated() {
            parser.append(contentsOf: [byte])
            let result = try parser.next()
            if i < frame.count - 1 { #expect(result == nil) } else { #expect(result == ping(42)) }
        }
    }

    @Test func coalescedFramesDecodeInOrder() throws {
        var parser = FrameParser()
        parser.append(contentsOf: bytes(ping(1)) + bytes(ping(2)) + bytes(ping(3)).prefix(5))
        #expect(try parser.next() == ping(1))
        #expect(try parser.next() == ping(2))
        #expect(try parser.next() == nil)
        parser.append(contentsOf: bytes(ping(3)).dropFirst(5))
        #expect(try parser.next() == ping(3))
    }

    /// Read buffers are taken over when nothing is pending and copied behind a partial frame.
    @Test func readBuffersSplitAnywhereDecodeInOrder() throws {
        var parser = FrameParser()
        let stream = bytes(ping(1)) + bytes(ping(2)) + bytes(ping(3)) + bytes(ping(4))
        let cuts = [0, bytes(ping(1)).count + 3, stream.count - bytes(ping(4)).count, stream.count]
        var decoded: [Simp_Envelope] = []
        for (from, to) in zip(cuts, cuts.dropFirst()) {
            var read = ByteBuffer(bytes: stream[from..<to])
            parser.append(&read)
            // The caller's buffer is its own again: writing to it cannot reach the parser.
            read.writeBytes([0xFF, 0xFF])
            while let envelope = try parser.next() { decoded.append(envelope) }
        }
        #expect(decoded == [ping(1), ping(2), ping(3), ping(4)])
        #expect(parser.bufferedBytes == 0)
    }

    @Test func overLimitLengthIsRejectedFromThePrefixAlone() {
        var parser = FrameParser(maxLength: 1024)
        parser.append(contentsOf: [0x00, 0x00, 0x04, 0x01])
        #expect(throws: FrameError.tooLarge(length: 1025, limit: 1024)) { try parser.next() }
    }

    @Test func hugeLengthIsRejectedWithoutWaitingForTheBody() {
        var parser = FrameParser()
        parser.append(contentsOf: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(throws: FrameError.tooLarge(length: Int(UInt32.max), limit: Frame.defaultMaxLength)) { try parser.next() }
    }

    @Test func zeroLengthIsMalformed() {
        var parser = FrameParser()
        parser.append(contentsOf: [0, 0, 0, 0])
        #expect(throws: FrameError.empty) { try parser.next() }
        #expect(FrameError.empty.code == .malformedFrame)
    }

    @Test func garbageBodyIsMalformed() {
        var parser = FrameParser()
        parser.append(contentsOf: [0, 0, 0, 4, 0xFF, 0xFF, 0xFF, 0xFF])
        do {
            _ = try parser.next()
            Issue.record("garbage decoded")
        } catch {
            guard case .malformed = error else { Issue.record("wrong error \(error)"); return }
            #expect(error.code == .malformedFrame)
        }
    }

    @Test func lengthPrefixIsBigEndian() {
        let frame = bytes(ping(1))
        let length = Int(frame[0]) << 24 | Int(frame[1]) << 16 | Int(frame[2]) << 8 | Int(frame[3])
        #expect(length == frame.count - 4)
    }
}
