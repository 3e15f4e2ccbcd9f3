import SIMPCore
import SIMPMLS

/// A KeyPackage upload's bytes as received: nothing in them is trusted. `checked` is the only
/// way to a `CheckedKeyPackage` (docs/E2EE.md, Part 2, "KeyPackages").
struct UncheckedKeyPackage: Sendable, Equatable {
    let bytes: [UInt8]

    /// Why a package was refused: `code` is what the uploader is answered.
    struct Problem: Error, Equatable, Sendable {
        var code: Simp_ErrorCode
        var reason: String
    }

    /// The package, if it is an `MLSMessage` of wire format `mls_key_package` (RFC 9420 section 6)
    /// that validates as a `KeyPackageIn` (section 10.1: suite 1 or 3, both signatures, a leaf
    /// node of source `key_package`, distinct init and encryption keys), whose lifetime
    /// (section 7.2) includes `nowSeconds`, whose credential is the basic credential
    /// "USER/DEVICE" of its uploader, and whose leaf's signature key is `certifiedKey`, the
    /// uploading device's certified key.
    func checked(user: String, device: String, certifiedKey: [UInt8], nowSeconds: UInt64) throws(Problem) -> CheckedKeyPackage {
        let package: KeyPackageIn
        do {
            guard case .keyPackage(let decoded) = try MLSMessage(mlsDecoding: bytes) else {
                throw Problem(code: .invalidKeyPackage, reason: "not an MLSMessage of wire format mls_key_package")
            }
            package = decoded
        } catch let problem as Problem {
            throw problem
        } catch {
            throw Problem(code: .invalidKeyPackage, reason: "the KeyPackage does not decode")
        }
        guard let suite = MLSCipherSuite(package.cipherSuite) else {
            throw Problem(code: .invalidKeyPackage, reason: "cipher suite \(package.cipherSuite) is not 1 or 3")
        }
        // The uploader's key first: a package signed by some other key is refused as such,
        // whether or not its own signatures hold.
        guard package.leafNode.signatureKey.bytes == certifiedKey else {
            throw Problem(code: .deviceNotCertified, reason: "the KeyPackage is not signed by \(device)'s certified key")
        }
        let valid: KeyPackage
        do {
            valid = try package.validate(suite: suite)
        } catch {
            throw Problem(code: .invalidKeyPackage, reason: "the KeyPackage does not validate (RFC 9420 section 10.1)")
        }
        guard case .keyPackage(let lifetime) = valid.leafNode.sourceFields, lifetime.contains(nowSeconds) else {
            throw Problem(code: .invalidKeyPackage, reason: "the KeyPackage's lifetime does not include now")
        }
        guard case .basic(let identity) = valid.credential, identity == KeyDirectoryRules.credentialIdentity(user: user, device: device) else {
            throw Problem(code: .invalidKeyPackage, reason: "the KeyPackage's credential is not the basic credential \(user)/\(device)")
        }
        return CheckedKeyPackage(bytes: bytes, package: valid)
    }
}

/// A KeyPackage that passed `UncheckedKeyPackage.checked`: stored as received.
struct CheckedKeyPackage: Sendable, Equatable {
    let bytes: [UInt8]
    let package: KeyPackage

    fileprivate init(bytes: [UInt8], package: KeyPackage) {
        self.bytes = bytes
        self.package = package
    }
}
