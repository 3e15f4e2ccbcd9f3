extension IncomingMessage {
    /// A message built by hand: for tests and for applications that show their own messages.
    public init(id: String, from: String, to: String, text: String, imageURL: String? = nil,
                seq: UInt64, sentAt: Int64, storedAt: Int64, fromDevice: String = "") {
        self.id = id
        self.from = from
        self.to = to
        self.fromDevice = fromDevice
        self.text = text
        self.imageURL = imageURL
        self.seq = seq
        self.sentAt = sentAt
        self.storedAt = storedAt
    }
}
