import Crypto
import Foundation

/// RFC 9420 section 5.1: the suite's MAC and AEAD.
extension MLSCipherSuite {
    /// `MAC(key, data)`: HMAC with the suite's hash (SHA-256 for both implemented suites).
    public func mac(key: [UInt8], data: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
    }

    /// Whether `tag` is `MAC(key, data)`, compared in constant time.
    public func verifyMAC(key: [UInt8], data: [UInt8], tag: [UInt8]) -> Bool {
        ConstantTime.equals(mac(key: key, data: data), tag)
    }

    /// `AEAD.Seal(key, nonce, aad, plaintext)`: the ciphertext followed by the 16-byte tag.
    public func seal(key: [UInt8], nonce: [UInt8], aad: [UInt8], plaintext: [UInt8]) throws -> [UInt8] {
        guard key.count == aeadKeyLength, nonce.count == aeadNonceLength else { throw MLSCryptoError.aeadFailure }
        let k = SymmetricKey(data: key)
        do {
            switch self {
            case .x25519AES128GCMSHA256Ed25519:
                let box = try AES.GCM.seal(plaintext, using: k, nonce: AES.GCM.Nonce(data: nonce), authenticating: aad)
                return Array(box.ciphertext) + Array(box.tag)
            case .x25519ChaCha20Poly1305SHA256Ed25519:
                let box = try ChaChaPoly.seal(plaintext, using: k, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: aad)
                return Array(box.ciphertext) + Array(box.tag)
            }
        } catch {
            throw MLSCryptoError.aeadFailure
        }
    }

    /// `AEAD.Open(key, nonce, aad, ciphertext)`: throws ``MLSCryptoError/aeadFailure`` when the
    /// tag does not verify or the input is shorter than a tag.
    public func open(key: [UInt8], nonce: [UInt8], aad: [UInt8], ciphertext: [UInt8]) throws -> [UInt8] {
        guard key.count == aeadKeyLength, nonce.count == aeadNonceLength, ciphertext.count >= 16 else {
            throw MLSCryptoError.aeadFailure
        }
        let k = SymmetricKey(data: key)
        let body = ciphertext.prefix(ciphertext.count - 16)
        let tag = ciphertext.suffix(16)
        do {
            switch self {
            case .x25519AES128GCMSHA256Ed25519:
                let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: body, tag: tag)
                return Array(try AES.GCM.open(box, using: k, authenticating: aad))
            case .x25519ChaCha20Poly1305SHA256Ed25519:
                let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: body, tag: tag)
                return Array(try ChaChaPoly.open(box, using: k, authenticating: aad))
            }
        } catch {
            throw MLSCryptoError.aeadFailure
        }
    }
}
