import Foundation
import Crypto
import NIOConcurrencyHelpers
import NIOCore
import SIMPCore
import SIMPTestSupport
import Testing

@Suite struct DatagramSealTests {
    let key = DatagramSeal.newKey()
    let header = DatagramHeader(kind: .data, sessionID: 42, packetNumber: 7)

    func sealed(_ payload: [UInt8] = Array("hello".utf8)) throws -> [UInt8] {
        Array(try DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer).readableBytesView)
    }

    func open(_ bytes: [UInt8], key: SymmetricKey? = nil, direction: DatagramDirection = .toServer) throws -> [UInt8] {
        var buffer = ByteBuffer(bytes: bytes)
        let h = try Datagram.decodeHeader(&buffer)
        return try DatagramSeal.open(h, sealed: buffer, key: key ?? self.key, direction: direction)
    }

    /// The wire format as docs/PROTOCOL.md states it, checked against an independent
    /// ChaCha20-Poly1305 (Python's `cryptography`): key 00..1f, nonce = direction (4 bytes BE)
    /// then packet number (8 bytes BE), the 20-byte header as authenticated data.
    @Test func sealMatchesAnIndependentImplementation() throws {
        let key = SymmetricKey(data: Array(UInt8(0)...UInt8(31)))
        let header = DatagramHeader(kind: .data, sessionID: 0x0102_0304_0506_0708, packetNumber: 0x1122_3344_5566_7788)
        let sealed = try DatagramSeal.seal(header, payload: Array("hello simp".utf8), key: key, direction: .toServer)
        let expected = "01020000010203040506070811223344556677884171352224c47c7c9682cafb2efbc074f6b6b774590c2efc76e4"
        #expect(sealed.readableBytesView.map { String(format: "%02x", $0) }.joined() == expected)
        var buffer = sealed
        let decoded = try Datagram.decodeHeader(&buffer)
        #expect(try DatagramSeal.open(decoded, sealed: buffer, key: key, direction: .toServer) == Array("hello simp".utf8))
    }

    /// The build seals with the cipher it asked for: swift-crypto's off Linux and with
    /// SIMP_PORTABLE_CRYPTO=1 (scripts/test.sh's portable run sets it for the build and the
    /// tests alike), OpenSSL's on Linux otherwise.
    @Test func theBuildSealsWithTheCipherItWasAskedFor() {
        #if os(Linux)
        let portable = ProcessInfo.processInfo.environment["SIMP_PORTABLE_CRYPTO"] == "1"
        #else
        let portable = true
        #endif
        #expect(DatagramSeal.implementation == (portable ? "swift-crypto ChaChaPoly" : "OpenSSL libcrypto"))
    }

    /// What the seal makes (through OpenSSL or swift-crypto, as built) swift-crypto's own
    /// `ChaChaPoly` opens, and the other way round, at every size a datagram can carry.
    @Test(arguments: [0, 1, 64, 1000, DatagramHeader.maxPayload])
    func interoperatesWithSwiftCrypto(size: Int) throws {
        let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        var buffer = try DatagramSeal.seal(header, payload: payload, key: key, direction: .toClient)
        let aad = Array(buffer.readableBytesView.prefix(DatagramHeader.size))
        let decoded = try Datagram.decodeHeader(&buffer)
        let sealed = Array(buffer.readableBytesView)
        let box = try ChaChaPoly.SealedBox(combined: nonce(packet: 7, direction: .toClient) + sealed)
        #expect(Array(try ChaChaPoly.open(box, using: key, authenticating: aad)) == payload)

        let theirs = try ChaChaPoly.seal(payload, using: key, nonce: ChaChaPoly.Nonce(data: nonce(packet: 7, direction: .toClient)),
                                         authenticating: aad)
        #expect(try DatagramSeal.open(decoded, sealed: ByteBuffer(bytes: theirs.ciphertext + theirs.tag), key: key,
                                      direction: .toClient) == payload)
    }

    private func nonce(packet: UInt64, direction: DatagramDirection) -> [UInt8] {
        withUnsafeBytes(of: direction.rawValue.bigEndian) { Array($0) } + withUnsafeBytes(of: packet.bigEndian) { Array($0) }
    }

    @Test func aKeyOfAnotherSizeIsRefused() throws {
        let short = SymmetricKey(size: .bits128)
        #expect(throws: DatagramError.unsealable) {
            try DatagramSeal.seal(header, payload: [1], key: short, direction: .toServer)
        }
        #expect(throws: DatagramError.unsealable) { try open(try sealed(), key: short) }
    }

    /// Threads sealing and opening at once under different keys never mix them up (with
    /// OpenSSL each thread keeps its own cipher context).
    @Test func threadsSealAndOpenAtOnce() throws {
        let failures = NIOLockedValueBox(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            let key = DatagramSeal.newKey()
            for packet in 1...2_000 {
                let header = DatagramHeader(kind: .data, sessionID: UInt64(thread), packetNumber: UInt64(packet))
                let payload = Array("thread \(thread) packet \(packet)".utf8)
                guard var buffer = try? DatagramSeal.seal(header, payload: payload, key: key, direction: .toServer),
                      let decoded = try? Datagram.decodeHeader(&buffer),
                      (try? DatagramSeal.open(decoded, sealed: buffer, key: key, direction: .toServer)) == payload else {
                    failures.withLockedValue { $0 += 1 }
                    continue
                }
            }
        }
        #expect(failures.withLockedValue { $0 } == 0)
    }

    @Test func roundTripAddsOnlyTheTag() throws {
        let bytes = try sealed()
        #expect(bytes.count == DatagramHeader.size + 5 + DatagramSeal.tagSize)
        #expect(try open(bytes) == Array("hello".utf8))
        #expect(!bytes.suffix(21).starts(with: Array("hello".utf8)), "payload is not in clear")
    }

    @Test func tamperedCiphertextTagOrHeaderIsRejected() throws {
        let bytes = try sealed()
        for index in [DatagramHeader.size, bytes.count - 1, 3, 12] {
            var tampered = bytes
            tampered[index] ^= 0x01
            #expect(throws: (any Error).self) { try open(tampered) }
        }
    }

    @Test func wrongKeyOrDirectionIsRejected() throws {
        let bytes = try sealed()
        #expect(throws: DatagramError.unsealable) { try open(bytes, key: DatagramSeal.newKey()) }
        #expect(throws: DatagramError.unsealable) { try open(bytes, direction: .toClient) }
    }

    @Test func truncatedDatagramIsRejected() throws {
        let bytes = try sealed([])
        #expect(throws: (any Error).self) { try open(Array(bytes.dropLast(1))) }
    }
}

@Suite struct ReplayWindowTests {
    /// Feeds the numbers in order and returns which were accepted.
    func accepted(_ numbers: [UInt64]) -> [Bool] {
        var w = ReplayWindow()
        return numbers.map { w.accept($0) }
    }

    @Test func eachNumberOnce() {
        #expect(accepted([1, 1, 3, 2, 2, 0]) == [true, false, true, true, false, false])
    }

    @Test func tooOldIsRejected() {
        let w = ReplayWindow.width
        // 3000 - width + 1 is just inside, 3000 - width just outside; after 10,000, 3000 is far too old.
        #expect(accepted([3000, 3000 - w + 1, 3000 - w, 10_000, 3000]) == [true, true, false, true, false])
    }

    /// An in-order run keeps no bitmap; the first gap makes one that counts the run as seen
    /// and the gap as not, wherever in a word the run ended (bit 63 included).
    @Test func theFirstGapAfterAnInOrderRunKeepsTheRunAndTheGapApart() {
        for runEnd: UInt64 in [1, 62, 63, 64, 127, 128, 3000] {
            var w = ReplayWindow()
            var refused: [UInt64] = []
            for number in 1...runEnd where !w.accept(number) { refused.append(number) }
            #expect(refused.isEmpty)
            let next: [UInt64] = [runEnd, runEnd + 3, runEnd + 1, runEnd, runEnd + 1, runEnd + 2, max(1, runEnd - 1), runEnd + 3]
            let answers = next.map { w.accept($0) }
            #expect(answers == [false, true, true, false, false, true, false, false], "gap after \(runEnd)")
        }
    }

    /// A resend burst of 500, reordered: its first datagram arrives last and is still taken.
    @Test func theHeadOfAReorderedBurstIsAccepted() {
        let burst = Array(UInt64(1)...500)
        #expect(accepted(Array(burst.dropFirst()) + [1]).allSatisfy { $0 })
    }

    /// Numbers seen before the window moved past their slot are forgotten, not mistaken for
    /// repeats, when the ring comes round: every fresh number is taken once, whatever the jumps.
    @Test func eachNumberOnceAcrossJumpsAndWraps() {
        var rng = SplitMix64(seed: 7)
        var w = ReplayWindow()
        var seen = Set<UInt64>()
        var top: UInt64 = 1
        for _ in 0..<50_000 {
            let jump = rng.next() % 8 == 0 ? rng.next() % 5000 : rng.next() % 3
            top += jump
            let back = rng.next() % (ReplayWindow.width + 200)
            let n = back < top ? top - back : top
            let expected = (w.highest < n || w.highest - n < ReplayWindow.width) && !seen.contains(n)
            #expect(w.accept(n) == expected, "number \(n), highest \(w.highest)")
            if expected { seen.insert(n) }
        }
    }
}
