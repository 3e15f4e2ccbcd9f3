import Foundation
import SIMPMLS
import Testing

/// The official vector files (Vectors/, from mlswg/mls-implementations): every case of the
/// implemented suites passes, and a file with one byte changed fails.
@Suite struct MLSVectorTests {
    @Test func everyTreeMathVectorPasses() throws {
        let report = try MLSTestVectors.check(file: "tree-math.json", contents: try VectorFiles.load("tree-math.json"))
        #expect(report.cases == 10)
        #expect(report.passed == 10)
        #expect(report.outcomes.allSatisfy { $0 == .passed })
    }

    @Test func aTreeMathFileWithOneByteChangedFails() throws {
        let original = try VectorFiles.load("tree-math.json")
        // The 4-leaf tree's root, 3, becomes 5.
        let changed = try VectorFiles.changingOneByte(original, "\"root\": 3,", to: "\"root\": 5,")
        let report = try MLSTestVectors.check(file: "tree-math.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[2] == .failed(reason: "root"))
    }

    @Test func everyCryptoBasicsCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "crypto-basics.json", contents: try VectorFiles.load("crypto-basics.json"))
        #expect(report.cases == 7)
        #expect(report.passed == 2)
        #expect(report.failed == 0)
        #expect(report.skipped == 5)
        // Cases are suites 1 through 7 in order: 1 and 3 checked, the rest skipped.
        for (i, outcome) in report.outcomes.enumerated() {
            if i == 0 || i == 2 { #expect(outcome == .passed) } else { #expect(outcome != .passed) }
        }
    }

    @Test(arguments: [
        ("\"out\": \"3b08", "\"out\": \"3b09", "derive_secret"),
        ("\"signature\": \"996b", "\"signature\": \"896b", "sign_with_label: the vector's signature does not verify"),
        ("\"ciphertext\": \"15c8", "\"ciphertext\": \"15c9", "encrypt_with_label: the vector's ciphertext does not decrypt"),
    ])
    func aCryptoBasicsFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("crypto-basics.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "crypto-basics.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    @Test func everyMessagesCaseDecodesAndEncodesToTheSameBytes() throws {
        let report = try MLSTestVectors.check(file: "messages.json", contents: try VectorFiles.load("messages.json"))
        #expect(report.cases == 300)
        #expect(report.passed == 300)
        #expect(report.failed == 0)
        #expect(report.skipped == 0)
    }

    @Test func aMessagesFileWithOneByteChangedFails() throws {
        // The first welcome's wire format, 3, becomes 6: no such format.
        let changed = try VectorFiles.changingOneByte(
            try VectorFiles.load("messages.json"), "\"mls_welcome\": \"00010003", to: "\"mls_welcome\": \"00010006")
        let report = try MLSTestVectors.check(file: "messages.json", contents: changed)
        #expect(report.failed == 1)
        guard case .failed(let reason) = report.outcomes[0] else {
            Issue.record("the changed case passed")
            return
        }
        #expect(reason.hasPrefix("mls_welcome: does not decode"))
    }

    @Test func everyTranscriptHashesCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "transcript-hashes.json", contents: try VectorFiles.load("transcript-hashes.json"))
        #expect(report.cases == 7)
        #expect(report.passed == 2)
        #expect(report.failed == 0)
        #expect(report.skipped == 5)
        for (i, outcome) in report.outcomes.enumerated() {
            if i == 0 || i == 2 { #expect(outcome == .passed) } else { #expect(outcome != .passed) }
        }
    }

    @Test(arguments: [
        ("\"confirmation_key\": \"26ae", "\"confirmation_key\": \"26af", "confirmation_tag"),
        ("\"interim_transcript_hash_before\": \"2597", "\"interim_transcript_hash_before\": \"2598",
         "confirmed_transcript_hash_after"),
        ("\"interim_transcript_hash_after\": \"193f", "\"interim_transcript_hash_after\": \"193e",
         "interim_transcript_hash_after"),
    ])
    func aTranscriptHashesFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("transcript-hashes.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "transcript-hashes.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    @Test func everyDeserializationCasePasses() throws {
        let report = try MLSTestVectors.check(file: "deserialization.json", contents: try VectorFiles.load("deserialization.json"))
        #expect(report.cases == 14)
        #expect(report.passed == 14)
        #expect(report.failed == 0)
    }

    @Test func aDeserializationFileWithOneByteChangedFails() throws {
        let changed = try VectorFiles.changingOneByte(
            try VectorFiles.load("deserialization.json"), "\"vlbytes_header\": \"4aaa\"", to: "\"vlbytes_header\": \"4aab\"")
        let report = try MLSTestVectors.check(file: "deserialization.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[7] == .failed(reason: "decoded length 2731"))
    }

    @Test func aFileThisBuildDoesNotImplementIsSaidSo() {
        #expect(throws: MLSTestVectors.CheckError.notImplemented("passive-client-other.json")) {
            try MLSTestVectors.check(file: "passive-client-other.json", contents: Data())
        }
        #expect(throws: MLSTestVectors.CheckError.self) {
            try MLSTestVectors.check(file: "tree-math.json", contents: Data("{}".utf8))
        }
    }

    // MARK: key-schedule.json, psk_secret.json, secret-tree.json

    /// Cases are suites 1 through 7, each `per` cases in a row: those of suites 1 and 3 pass, the
    /// others are skipped, none fails.
    static func expectSuites1And3Pass(_ report: MLSTestVectors.FileReport, cases: Int, per: Int) {
        #expect(report.cases == cases)
        #expect(report.failed == 0)
        #expect(report.passed == 2 * per)
        #expect(report.skipped == cases - 2 * per)
        for (i, outcome) in report.outcomes.enumerated() {
            let suite = i / per + 1
            if suite == 1 || suite == 3 {
                #expect(outcome == .passed, "case \(i)")
            } else {
                #expect(outcome == .skipped(reason: "cipher suite \(suite) not implemented"), "case \(i)")
            }
        }
    }

    @Test func everyKeyScheduleCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "key-schedule.json", contents: try VectorFiles.load("key-schedule.json"))
        Self.expectSuites1And3Pass(report, cases: 7, per: 1)
    }

    @Test(arguments: [
        // Inputs: a tree hash (so the GroupContext differs), a commit secret, a PSK secret.
        ("\"tree_hash\": \"9769e3", "\"tree_hash\": \"9769e4", "epoch 0: group_context"),
        ("\"commit_secret\": \"a22606", "\"commit_secret\": \"a22607", "epoch 0: joiner_secret"),
        ("\"psk_secret\": \"e871b2", "\"psk_secret\": \"e871b3", "epoch 0: welcome_secret"),
        // Outputs.
        ("\"joiner_secret\": \"4fb996", "\"joiner_secret\": \"4fb997", "epoch 0: joiner_secret"),
        ("\"resumption_psk\": \"d78ca8", "\"resumption_psk\": \"d78ca9", "epoch 0: resumption_psk"),
        ("\"external_pub\": \"640117", "\"external_pub\": \"640118", "epoch 0: external_pub"),
        ("\"secret\": \"dbce4e", "\"secret\": \"dbce4f", "epoch 0: exporter"),
    ])
    func aKeyScheduleFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("key-schedule.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "key-schedule.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    @Test func aLaterEpochOfTheKeyScheduleIsChecked() throws {
        let data = try VectorFiles.load("key-schedule.json")
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
        let epochs = try #require(json[0]["epochs"] as? [[String: Any]])
        let last = try #require(epochs.last?["init_secret"] as? String)
        let first = try #require(last.first)
        let other = first == "0" ? "1" : "0"
        let changed = try VectorFiles.changingOneByte(data, "\"init_secret\": \"\(last)", to: "\"init_secret\": \"\(other)\(last.dropFirst())")
        let report = try MLSTestVectors.check(file: "key-schedule.json", contents: changed)
        #expect(report.outcomes[0] == .failed(reason: "epoch \(epochs.count - 1): init_secret"))
    }

    @Test func everyPSKSecretCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "psk_secret.json", contents: try VectorFiles.load("psk_secret.json"))
        Self.expectSuites1And3Pass(report, cases: 77, per: 11)
    }

    @Test(arguments: [
        ("\"psk_secret\": \"aa6ee4", "\"psk_secret\": \"aa6ee5"),
        ("\"psk_nonce\": \"66b25b", "\"psk_nonce\": \"66b25c"),
        ("\"psk_id\": \"55c388", "\"psk_id\": \"55c389"),
        ("\"psk\": \"e0a059", "\"psk\": \"e0a05a"),
    ])
    func aPSKSecretFileWithOneByteChangedFails(original: String, replacement: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("psk_secret.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "psk_secret.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[1] == .failed(reason: "psk_secret"))
    }

    @Test func everySecretTreeCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "secret-tree.json", contents: try VectorFiles.load("secret-tree.json"))
        Self.expectSuites1And3Pass(report, cases: 21, per: 3)
    }

    @Test(arguments: [
        (0, "\"key\": \"92667d", "\"key\": \"92667e", "sender_data key"),
        (0, "\"nonce\": \"362785", "\"nonce\": \"362786", "sender_data nonce"),
        (0, "\"handshake_key\": \"a2d6b8", "\"handshake_key\": \"a2d6b9", "leaf 0 generation 0: handshake_key"),
        (0, "\"application_nonce\": \"a08d3a", "\"application_nonce\": \"a08d3b", "leaf 0 generation 15: application_nonce"),
        (1, "\"application_key\": \"d82803", "\"application_key\": \"d82804", "leaf 7 generation 15: application_key"),
        (1, "\"handshake_nonce\": \"45ead0", "\"handshake_nonce\": \"45ead1", "leaf 7 generation 15: handshake_nonce"),
    ])
    func aSecretTreeFileWithOneByteChangedFails(index: Int, original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("secret-tree.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "secret-tree.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[index] == .failed(reason: reason))
    }

    // MARK: message-protection.json, welcome.json

    @Test func everyMessageProtectionCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "message-protection.json", contents: try VectorFiles.load("message-protection.json"))
        Self.expectSuites1And3Pass(report, cases: 7, per: 1)
    }

    @Test(arguments: [
        // Keys: the membership key, the sender data secret, the secret tree's root.
        ("\"membership_key\": \"1f338b", "\"membership_key\": \"1f338c", "proposal_pub: does not unprotect: invalidMembershipTag"),
        ("\"sender_data_secret\": \"b21dfb", "\"sender_data_secret\": \"b21dfc",
         "proposal_priv: does not unprotect: senderDataDecryptionFailed"),
        ("\"encryption_secret\": \"4db335", "\"encryption_secret\": \"4db336",
         "proposal_priv: does not unprotect: contentDecryptionFailed"),
        // The raw content: a Remove of leaf 2 becomes one of leaf 3; the application data.
        ("\"proposal\": \"000300000002", "\"proposal\": \"000300000003", "proposal_pub: content"),
        ("\"application\": \"a1ab26", "\"application\": \"a1ab27", "application_priv: content"),
        // The messages' last bytes: membership tags, AEAD tags.
        ("0bfcf1ec\"", "0bfcf1ed\"", "proposal_pub: does not unprotect: invalidMembershipTag"),
        ("8c3b03a2\"", "8c3b03a3\"", "commit_pub: does not unprotect: invalidMembershipTag"),
        ("5959443c\"", "5959443d\"", "proposal_priv: does not unprotect: contentDecryptionFailed"),
        ("5fe225b2\"", "5fe225b3\"", "commit_priv: does not unprotect: contentDecryptionFailed"),
        ("5d36b1ab\"", "5d36b1ac\"", "application_priv: does not unprotect: contentDecryptionFailed"),
    ])
    func aMessageProtectionFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("message-protection.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "message-protection.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    @Test func aMessageProtectionSignatureKeyOfAnotherSignerFails() throws {
        // signature_pub no longer matches signature_priv: the case is refused before any message.
        let changed = try VectorFiles.changingOneByte(
            try VectorFiles.load("message-protection.json"), "\"signature_pub\": \"62087f", to: "\"signature_pub\": \"62087e")
        let report = try MLSTestVectors.check(file: "message-protection.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: "signature_pub is not signature_priv's"))
    }

    @Test func everyWelcomeCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "welcome.json", contents: try VectorFiles.load("welcome.json"))
        Self.expectSuites1And3Pass(report, cases: 7, per: 1)
    }

    @Test(arguments: [
        ("\"init_priv\": \"c697caf7ae", "\"init_priv\": \"c697caf7af", "welcome: does not decrypt: wrongInitKey"),
        ("ee134241\"", "ee134242\"", "welcome: group info: invalidSignature"),
        ("7e5a1f03\"", "7e5a1f04\"", "key_package: invalidSignature"),
        ("4317388e\"", "4317388f\"", "welcome: does not decrypt: groupSecretsDecryptionFailed"),
    ])
    func aWelcomeFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("welcome.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "welcome.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    // MARK: passive-client-*.json

    /// Cases 0-7 are suite 1 and 16-23 suite 3 (none with epochs after the join): they join
    /// through ``MLSGroup`` and reach the epoch authenticator; the other suites are skipped.
    @Test func everyPassiveClientWelcomeCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(
            file: "passive-client-welcome.json", contents: try VectorFiles.load("passive-client-welcome.json"))
        #expect(report.cases == 56)
        #expect(report.passed == 16)
        #expect(report.failed == 0)
        #expect(report.skipped == 40)
        for i in Array(0..<8) + Array(16..<24) { #expect(report.outcomes[i] == .passed, "case \(i)") }
    }

    @Test func aPassiveClientWelcomeFileWithOneByteChangedFails() throws {
        let changed = try VectorFiles.changingOneByte(
            try VectorFiles.load("passive-client-welcome.json"), "37db18cb065dbadd2dc9baedf1d29fffebddfd66cbe9d4c928bd3cbf1da4f1ed", to: "37db18cb065dbadd2dc9baedf1d29fffebddfd66cbe9d4c928bd3cbf1da4f1e0")
        let report = try MLSTestVectors.check(file: "passive-client-welcome.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: "initial_epoch_authenticator"))
    }

    /// Cases 0-12 are suite 1 and 26-38 suite 3, each a join and two epochs: commits with and
    /// without a path, proposals by value and by reference (Add, Update, Remove, external and
    /// resumption PSKs, GroupContextExtensions); every one reaches each epoch's authenticator.
    @Test func everyPassiveClientHandlingCommitCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(
            file: "passive-client-handling-commit.json", contents: try VectorFiles.load("passive-client-handling-commit.json"))
        #expect(report.cases == 91)
        #expect(report.passed == 26)
        #expect(report.failed == 0)
        #expect(report.skipped == 65)
        for i in Array(0..<13) + Array(26..<39) { #expect(report.outcomes[i] == .passed, "case \(i)") }
    }

    @Test func aPassiveClientHandlingCommitFileWithOneByteChangedFails() throws {
        // The first case's first epoch authenticator.
        let changed = try VectorFiles.changingOneByte(
            try VectorFiles.load("passive-client-handling-commit.json"), "6d8a345fd5fb0fa1540e63f421e4fd4cd1d6f682d7c9677f007e384db4ec69ca",
            to: "6d8a345fd5fb0fa1540e63f421e4fd4cd1d6f682d7c9677f007e384db4ec69cb")
        let report = try MLSTestVectors.check(file: "passive-client-handling-commit.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: "epochs[0].epoch_authenticator"))
    }

    /// One case of suite 1: a join, then 200 epochs of random Adds, Removes and Updates by
    /// value and by reference (1,542 proposals, most never committed).
    @Test func thePassiveClientRandomCasePasses() throws {
        let report = try MLSTestVectors.check(
            file: "passive-client-random.json", contents: try VectorFiles.load("passive-client-random.json"))
        #expect(report.cases == 1)
        #expect(report.outcomes == [.passed])
    }
}
