/// A message as the inbox holds it: its serialized protobuf with the sequence number appended
/// as field 10 (`seq`, varint). Protobuf lets a later occurrence of a scalar field win, so the
/// stored bytes parse with their seq, and the store script and the server append the same bytes.
public enum StoredMessage {
    public static func appending(seq: UInt64, to message: [UInt8]) -> [UInt8] {
        appending(varint: seq, tag: [0x50], to: message)  // field 10, wire type 0
    }

    /// A group message's place in the group's order: `groupSeq` (field 16, varint), as the
    /// group's store script appends it.
    public static func appending(groupSeq: UInt64, to message: [UInt8]) -> [UInt8] {
        appending(varint: groupSeq, tag: [0x80, 0x01], to: message)
    }

    private static func appending(varint: UInt64, tag: [UInt8], to message: [UInt8]) -> [UInt8] {
        var bytes = message
        bytes.reserveCapacity(message.count + tag.count + 10)
        bytes.append(contentsOf: tag)
        var value = varint
        while value >= 0x80 {
            bytes.append(UInt8(value & 0x7F) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
        return bytes
    }

    /// The copy kept for the sender's other devices: the message with `fromDevice` (field 15,
    /// length-delimited) appended. A device name is at most `DeviceName.maxBytes`, so its
    /// length is one byte.
    public static func appending(fromDevice device: String, to message: [UInt8]) -> [UInt8] {
        let name = Array(device.utf8.prefix(DeviceName.maxBytes))
        return message + [0x7A, UInt8(name.count)] + name
    }
}
