import SIMPCore
import Testing

@Suite struct DatagramBundleTests {
    @Test func oneMessageGoesAsPlainData() {
        let datagrams = DatagramBundle.pack([[1, 2, 3]])
        #expect(datagrams.count == 1)
        #expect(datagrams[0].kind == .data)
        #expect(datagrams[0].payload == [1, 2, 3])
    }

    @Test func severalMessagesShareABundleAndSplitBackInOrder() throws {
        let messages: [[UInt8]] = [[1], [2, 2], Array(repeating: 3, count: 300)]
        let datagrams = DatagramBundle.pack(messages, spread: 1)
        #expect(datagrams.count == 1)
        #expect(datagrams[0].kind == .bundle)
        #expect(datagrams[0].payload.prefix(3) == [0, 1, 1], "2-byte big-endian length, then the bytes")
        #expect(datagrams[0].payload.count == messages.reduce(0) { $0 + 2 + $1.count })
        #expect(try DatagramBundle.split(datagrams[0].payload) == messages)
    }

    /// Every datagram stays within the payload limit; a message too big to share one goes alone
    /// as DATA; the order across datagrams is the order given.
    @Test func bundlesStayWithinTheLimit() throws {
        let sizes = [500, 500, 500, 1200, 10, 1199, 20, 30]
        let messages = sizes.enumerated().map { index, size in [UInt8](repeating: UInt8(index), count: size) }
        let datagrams = DatagramBundle.pack(messages, spread: 1)
        var back: [[UInt8]] = []
        for datagram in datagrams {
            #expect(datagram.payload.count <= DatagramHeader.maxPayload)
            back += datagram.kind == .bundle ? try DatagramBundle.split(datagram.payload) : [datagram.payload]
        }
        #expect(back == messages)
        #expect(datagrams.map(\.kind) == [.bundle, .data, .data, .data, .data, .bundle])
    }

    /// A flush's messages go in at least `spread` datagrams, so one lost datagram leaves
    /// others after it to show the gap; beyond that, as few as the size limit allows.
    @Test func messagesAreSpreadOverAtLeastFourDatagrams() throws {
        let small = (0..<4).map { [UInt8](repeating: UInt8($0), count: 10) }
        #expect(DatagramBundle.pack(small).map(\.kind) == [.data, .data, .data, .data])
        let ten = (0..<10).map { [UInt8](repeating: UInt8($0), count: 10) }
        let spread = DatagramBundle.pack(ten)
        #expect(try spread.map { try Self.count($0) } == [3, 3, 2, 2])
        #expect(try spread.flatMap { $0.kind == .bundle ? try DatagramBundle.split($0.payload) : [$0.payload] } == ten)
        let many = (0..<40).map { [UInt8](repeating: UInt8($0), count: 200) }
        #expect(DatagramBundle.pack(many).count == 8, "40 messages of 202 bytes: five to a 1,200-byte bundle")
    }

    /// Every count of small messages: at least four datagrams (or one each when fewer), none
    /// holding more than one message more than another, all of them back in order.
    @Test func everyCountIsSpreadEvenly() throws {
        for n in 1...100 {
            let messages = (0..<n).map { [UInt8](repeating: UInt8(truncatingIfNeeded: $0), count: 8) }
            let datagrams = DatagramBundle.pack(messages)
            let counts = try datagrams.map { try Self.count($0) }
            #expect(datagrams.count == min(n, DatagramBundle.spread), "\(n) messages: \(counts)")
            #expect(counts.max()! - counts.min()! <= 1, "\(n) messages: \(counts)")
            #expect(try datagrams.flatMap { $0.kind == .bundle ? try DatagramBundle.split($0.payload) : [$0.payload] } == messages)
        }
    }

    private static func count(_ datagram: (kind: DatagramKind, payload: [UInt8])) throws -> Int {
        datagram.kind == .bundle ? try DatagramBundle.split(datagram.payload).count : 1
    }

    @Test(arguments: [
        ([], DatagramBundleError.empty),
        ([0, 0], .emptyEntry(at: 0)),
        ([0], .truncated(at: 0)),
        ([0, 3, 1, 2], .truncated(at: 0)),
        ([0, 1, 9, 0], .truncated(at: 3)),
    ] as [([UInt8], DatagramBundleError)])
    func malformedBundlesAreRefused(payload: [UInt8], error: DatagramBundleError) {
        #expect(throws: error) { try DatagramBundle.split(payload) }
    }
}
