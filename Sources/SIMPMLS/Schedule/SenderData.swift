extension MLSCipherSuite {
    /// RFC 9420 section 6.3.2: the key and nonce that encrypt a PrivateMessage's sender data,
    /// from the epoch's `sender_data_secret` and the message's ciphertext:
    ///
    ///     ciphertext_sample = ciphertext[0..KDF.Nh-1]
    ///     sender_data_key = ExpandWithLabel(sender_data_secret, "key", ciphertext_sample, AEAD.Nk)
    ///     sender_data_nonce = ExpandWithLabel(sender_data_secret, "nonce", ciphertext_sample, AEAD.Nn)
    ///
    /// A ciphertext shorter than `KDF.Nh` bytes is its own sample (the RFC: "the entire
    /// ciphertext is used as the sample").
    public func senderDataKeyAndNonce(senderDataSecret: SecretBytes, ciphertext: [UInt8]) throws -> (key: SecretBytes, nonce: SecretBytes) {
        try KeySchedule.checkLength(senderDataSecret, "sender_data_secret", self)
        let sample = Array(ciphertext.prefix(hashLength))
        let key = try expandWithLabel(secret: senderDataSecret.bytes, label: Array("key".utf8), context: sample, length: aeadKeyLength)
        let nonce = try expandWithLabel(secret: senderDataSecret.bytes, label: Array("nonce".utf8), context: sample, length: aeadNonceLength)
        return (SecretBytes(key), SecretBytes(nonce))
    }
}
