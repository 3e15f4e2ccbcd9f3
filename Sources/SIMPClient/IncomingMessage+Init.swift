import Foundation

extension IncomingMessage {
    /// A message built by hand: for tests and for applications that show their own messages.
    public init(id: String, from: String, to: String, text: String, imageURL: URL? = nil,
                seq: UInt64, sentAt: Date, storedAt: Date? = nil, fromDevice: String = "") {
        self.id = id
        self.from = from
        self.to = to
        self.fromDevice = fromDevice
        self.text = text
        imageLink = imageURL?.absoluteString
        self.seq = seq
        sentMillis = sentAt.millis
        storedMillis = storedAt?.millis ?? 0
    }
}
