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
        #expect(throws: MLSTestVectors.CheckError.notImplemented("secret-tree.json")) {
            try MLSTestVectors.check(file: "secret-tree.json", contents: Data())
        }
        #expect(throws: MLSTestVectors.CheckError.self) {
            try MLSTestVectors.check(file: "tree-math.json", contents: Data("{}".utf8))
        }
    }
}
