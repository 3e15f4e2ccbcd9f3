/// Building large trees for tests and benchmarks (SPI `Testing`, not part of the API).
extension PublicRatchetTree {
    /// The tree after the member at `leaf` committed with a path from `leafSecret`, exactly as
    /// ``createUpdatePath(from:leafSecret:signer:leafNode:groupContext:excluding:randomness:)``
    /// leaves it (direct path blanked, filtered direct path set, parent hashes, the leaf signed
    /// for `groupID` as source `commit`), but without encrypting the path secrets to the copath:
    /// a group of 10,000 members built by real commits would cost thousands of HPKE encryptions
    /// per commit while its parents are still blank.
    @_spi(Testing)
    public func mergingPathWithoutCiphertexts(
        from leaf: LeafIndex, leafSecret: SecretBytes, signer: SignaturePrivateKey, groupID: [UInt8]
    ) throws -> PublicRatchetTree {
        try mergingOwnPath(from: leaf, leafSecret: leafSecret, signer: signer, leafNode: nil, groupID: groupID).tree
    }
}
