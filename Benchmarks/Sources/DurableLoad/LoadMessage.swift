/// A message's body: its counter and its send time (monotonic nanoseconds), 8 bytes each,
/// big-endian, then filler up to the pattern's size. The receiver learns both from the body.
enum LoadMessage {
    static let headerBytes = 16

    static func template(size: Int) -> [UInt8] {
        [UInt8](repeating: UInt8(ascii: "x"), count: max(size, headerBytes))
    }

    static func stamp(_ body: UnsafeMutableRawBufferPointer, counter: UInt64, sentAt: UInt64) {
        body.storeBytes(of: counter.bigEndian, toByteOffset: 0, as: UInt64.self)
        body.storeBytes(of: sentAt.bigEndian, toByteOffset: 8, as: UInt64.self)
    }

    /// nil for a body too short to hold both.
    static func read(_ body: UnsafeRawBufferPointer) -> (counter: UInt64, sentAt: UInt64)? {
        guard body.count >= headerBytes else { return nil }
        let counter = UInt64(bigEndian: body.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let sentAt = UInt64(bigEndian: body.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        return (counter, sentAt)
    }
}
