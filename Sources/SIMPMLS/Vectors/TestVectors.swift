import Foundation

/// Checks of SIMPMLS against the JSON test vector files of mlswg/mls-implementations
/// (`test-vectors/*.json`, described in its `test-vectors.md`). Pure: the caller reads the file.
///
/// A case is one element of the file's top-level array. A case whose cipher suite this build
/// does not implement is skipped; a case that does not parse, or whose values differ from ours,
/// fails.
public enum MLSTestVectors {
    /// The file names of mls-implementations' vectors, and whether this build checks them.
    public static let implemented: Set<String> = [
        "tree-math.json", "crypto-basics.json", "key-schedule.json", "psk_secret.json", "secret-tree.json",
        "messages.json", "transcript-hashes.json", "deserialization.json", "message-protection.json",
        "welcome.json", "tree-operations.json", "tree-validation.json", "treekem.json", "passive-client-welcome.json",
        "passive-client-handling-commit.json", "passive-client-random.json",
    ]
    public static let known: Set<String> = [
        "tree-math.json", "crypto-basics.json", "secret-tree.json", "message-protection.json",
        "key-schedule.json", "psk_secret.json", "transcript-hashes.json", "welcome.json",
        "tree-operations.json", "tree-validation.json", "treekem.json", "messages.json",
        "passive-client-welcome.json", "passive-client-handling-commit.json", "passive-client-random.json",
        "deserialization.json",
    ]

    /// One case's outcome; `reason` says what differed, never a secret's value.
    public enum Outcome: Equatable, Sendable {
        case passed
        case failed(reason: String)
        case skipped(reason: String)
    }

    /// The outcome of every case of one file.
    public struct FileReport: Sendable {
        public let file: String
        public let outcomes: [Outcome]
        public var cases: Int { outcomes.count }
        public var passed: Int { outcomes.filter { $0 == .passed }.count }
        public var failed: Int { outcomes.filter { if case .failed = $0 { true } else { false } }.count }
        public var skipped: Int { outcomes.filter { if case .skipped = $0 { true } else { false } }.count }
    }

    public enum CheckError: Error, Equatable, Sendable {
        /// The file name is not one this build checks.
        case notImplemented(String)
        /// The file is not a JSON array.
        case malformedFile(String)
    }

    /// Checks every case of the vector file `name` (its base name, e.g. `tree-math.json`).
    public static func check(file name: String, contents: Data) throws -> FileReport {
        let outcomes: [Outcome]
        switch name {
        case "tree-math.json": outcomes = try cases(contents, TreeMathCase.self).map(checkTreeMath)
        case "crypto-basics.json": outcomes = try cases(contents, CryptoBasicsCase.self).map(checkCryptoBasics)
        case "key-schedule.json": outcomes = try cases(contents, KeyScheduleCase.self).map(checkKeySchedule)
        case "psk_secret.json": outcomes = try cases(contents, PSKSecretCase.self).map(checkPSKSecret)
        case "secret-tree.json": outcomes = try cases(contents, SecretTreeCase.self).map(checkSecretTree)
        case "messages.json": outcomes = try cases(contents, MessagesCase.self).map(checkMessages)
        case "transcript-hashes.json": outcomes = try cases(contents, TranscriptHashesCase.self).map(checkTranscriptHashes)
        case "deserialization.json": outcomes = try cases(contents, DeserializationCase.self).map(checkDeserialization)
        case "message-protection.json": outcomes = try cases(contents, MessageProtectionCase.self).map(checkMessageProtection)
        case "welcome.json": outcomes = try cases(contents, WelcomeCase.self).map(checkWelcome)
        case "tree-operations.json": outcomes = try cases(contents, TreeOperationsCase.self).map(checkTreeOperations)
        case "tree-validation.json": outcomes = try cases(contents, TreeValidationCase.self).map(checkTreeValidation)
        case "treekem.json": outcomes = try cases(contents, TreeKEMCase.self).map(checkTreeKEM)
        case "passive-client-welcome.json", "passive-client-handling-commit.json", "passive-client-random.json":
            outcomes = try cases(contents, PassiveClientCase.self).map(checkPassiveClient)
        default: throw CheckError.notImplemented(name)
        }
        return FileReport(file: name, outcomes: outcomes)
    }

    /// A case that decodes on its own, so one malformed case fails alone.
    struct Lenient<T: Decodable>: Decodable {
        let value: T?
        let error: String?
        init(from decoder: any Decoder) throws {
            do {
                value = try T(from: decoder)
                error = nil
            } catch {
                value = nil
                self.error = "malformed case: \(error)"
            }
        }
    }

    static func cases<T: Decodable>(_ data: Data, _: T.Type) throws -> [Result<T, CaseError>] {
        let all: [Lenient<T>]
        do { all = try JSONDecoder().decode([Lenient<T>].self, from: data) } catch {
            throw CheckError.malformedFile("not a JSON array of cases: \(error)")
        }
        return all.map { c in c.value.map { .success($0) } ?? .failure(CaseError(reason: c.error ?? "malformed case")) }
    }

    struct CaseError: Error { let reason: String }

    // MARK: tree-math.json

    struct TreeMathCase: Decodable {
        let n_leaves: UInt32
        let n_nodes: UInt32
        let root: UInt32
        let left: [UInt32?]
        let right: [UInt32?]
        let parent: [UInt32?]
        let sibling: [UInt32?]
    }

    static func checkTreeMath(_ parsed: Result<TreeMathCase, CaseError>) -> Outcome {
        let c: TreeMathCase
        switch parsed {
        case .success(let v): c = v
        case .failure(let e): return .failed(reason: e.reason)
        }
        guard let size = TreeSize(leafCount: c.n_leaves) else { return .failed(reason: "n_leaves \(c.n_leaves) is not a tree size") }
        guard size.nodeCount == c.n_nodes else { return .failed(reason: "n_nodes") }
        guard size.root.value == c.root else { return .failed(reason: "root") }
        let n = Int(c.n_nodes)
        guard c.left.count == n, c.right.count == n, c.parent.count == n, c.sibling.count == n else {
            return .failed(reason: "array lengths differ from n_nodes")
        }
        for i in 0..<n {
            let x = NodeIndex(UInt32(i))
            if TreeMath.left(x)?.value != c.left[i] { return .failed(reason: "left(\(i))") }
            if TreeMath.right(x)?.value != c.right[i] { return .failed(reason: "right(\(i))") }
            if TreeMath.parent(x, in: size)?.value != c.parent[i] { return .failed(reason: "parent(\(i))") }
            if TreeMath.sibling(x, in: size)?.value != c.sibling[i] { return .failed(reason: "sibling(\(i))") }
        }
        return .passed
    }

    // MARK: crypto-basics.json

    struct CryptoBasicsCase: Decodable {
        struct RefHash: Decodable { let label: String; let value: Hex; let out: Hex }
        struct ExpandWithLabel: Decodable { let secret: Hex; let label: String; let context: Hex; let length: Int; let out: Hex }
        struct DeriveSecret: Decodable { let label: String; let secret: Hex; let out: Hex }
        struct DeriveTreeSecret: Decodable { let secret: Hex; let label: String; let generation: UInt32; let length: Int; let out: Hex }
        struct SignWithLabel: Decodable { let priv: Hex; let pub: Hex; let content: Hex; let label: String; let signature: Hex }
        struct EncryptWithLabel: Decodable {
            let priv: Hex; let pub: Hex; let label: String; let context: Hex; let plaintext: Hex; let kem_output: Hex; let ciphertext: Hex
        }
        let cipher_suite: UInt16
        let ref_hash: RefHash
        let expand_with_label: ExpandWithLabel
        let derive_secret: DeriveSecret
        let derive_tree_secret: DeriveTreeSecret
        let sign_with_label: SignWithLabel
        let encrypt_with_label: EncryptWithLabel
    }

    /// Fixed randomness for the encrypt-then-decrypt check: not a secret, only a test input.
    static let checkRandomness = [UInt8](repeating: 0x5A, count: MLSCipherSuite.encapsulationRandomnessLength)

    static func checkCryptoBasics(_ parsed: Result<CryptoBasicsCase, CaseError>) -> Outcome {
        let c: CryptoBasicsCase
        switch parsed {
        case .success(let v): c = v
        case .failure(let e): return .failed(reason: e.reason)
        }
        guard let suite = MLSCipherSuite(CipherSuiteID(c.cipher_suite)) else {
            return .skipped(reason: "cipher suite \(c.cipher_suite) not implemented")
        }
        do {
            let r = c.ref_hash
            guard ConstantTime.equals(try suite.refHash(label: Array(r.label.utf8), value: r.value.bytes), r.out.bytes) else {
                return .failed(reason: "ref_hash")
            }
            let e = c.expand_with_label
            guard ConstantTime.equals(
                try suite.expandWithLabel(secret: e.secret.bytes, label: Array(e.label.utf8), context: e.context.bytes, length: e.length),
                e.out.bytes)
            else { return .failed(reason: "expand_with_label") }
            let d = c.derive_secret
            guard ConstantTime.equals(try suite.deriveSecret(secret: d.secret.bytes, label: Array(d.label.utf8)), d.out.bytes) else {
                return .failed(reason: "derive_secret")
            }
            let t = c.derive_tree_secret
            guard ConstantTime.equals(
                try suite.deriveTreeSecret(secret: t.secret.bytes, label: Array(t.label.utf8), generation: t.generation, length: t.length),
                t.out.bytes)
            else { return .failed(reason: "derive_tree_secret") }

            let s = c.sign_with_label
            let signer = try SignaturePrivateKey(rawRepresentation: s.priv.bytes)
            let verifier = try SignaturePublicKeyIn(bytes: s.pub.bytes).validate(for: suite)
            let label = Array(s.label.utf8)
            guard signer.publicKey == verifier else { return .failed(reason: "sign_with_label: pub is not priv's") }
            do {
                _ = try SignedContentIn(label: label, content: s.content.bytes, signature: s.signature.bytes).verify(with: verifier, suite: suite)
            } catch { return .failed(reason: "sign_with_label: the vector's signature does not verify") }
            let ours = try suite.signWithLabel(signer, label: label, content: s.content.bytes)
            guard suite.verifyWithLabel(verifier, label: label, content: s.content.bytes, signature: ours) else {
                return .failed(reason: "sign_with_label: our signature does not verify")
            }

            let h = c.encrypt_with_label
            let priv = try HPKEPrivateKey(rawRepresentation: h.priv.bytes)
            let pub = try HPKEPublicKeyIn(bytes: h.pub.bytes).validate(for: suite)
            guard priv.publicKey == pub else { return .failed(reason: "encrypt_with_label: pub is not priv's") }
            let hLabel = Array(h.label.utf8)
            let opened: [UInt8]
            do {
                opened = try suite.decryptWithLabel(
                    priv, label: hLabel, context: h.context.bytes,
                    ciphertext: HPKECiphertext(kemOutput: h.kem_output.bytes, ciphertext: h.ciphertext.bytes))
            } catch { return .failed(reason: "encrypt_with_label: the vector's ciphertext does not decrypt") }
            guard ConstantTime.equals(opened, h.plaintext.bytes) else { return .failed(reason: "encrypt_with_label: plaintext") }
            let sealed = try suite.encryptWithLabel(
                pub, label: hLabel, context: h.context.bytes, plaintext: h.plaintext.bytes, randomness: checkRandomness)
            let reopened: [UInt8]
            do {
                reopened = try suite.decryptWithLabel(priv, label: hLabel, context: h.context.bytes, ciphertext: sealed)
            } catch { return .failed(reason: "encrypt_with_label: our ciphertext does not decrypt") }
            guard ConstantTime.equals(reopened, h.plaintext.bytes) else { return .failed(reason: "encrypt_with_label: round trip") }
        } catch {
            return .failed(reason: "error: \(error)")
        }
        return .passed
    }
}

/// Bytes written as lowercase or uppercase hexadecimal in a vector file; strict: an odd length
/// or a non-hex character fails the case.
struct Hex: Decodable {
    let bytes: [UInt8]

    init(from decoder: any Decoder) throws {
        let s = try decoder.singleValueContainer().decode(String.self)
        guard let b = Hex.parse(s) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not hex"))
        }
        bytes = b
    }

    static func parse(_ s: String) -> [UInt8]? {
        let chars = Array(s.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = nibble(chars[i]), let lo = nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }

    static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
