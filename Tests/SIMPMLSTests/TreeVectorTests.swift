import Foundation
import SIMPMLS
import Testing

/// tree-operations.json, tree-validation.json and treekem.json: every case of suites 1 and 3
/// passes, and a file with one byte changed fails.
extension MLSVectorTests {
    // MARK: tree-operations.json

    @Test func everyTreeOperationsCasePasses() throws {
        let report = try MLSTestVectors.check(file: "tree-operations.json", contents: try VectorFiles.load("tree-operations.json"))
        // Five cases, all suite 1: two adds, an update, two removes.
        #expect(report.cases == 5)
        #expect(report.passed == 5)
        #expect(report.outcomes.allSatisfy { $0 == .passed })
    }

    @Test(arguments: [
        (0, "\"tree_hash_before\": \"cf16040a", "\"tree_hash_before\": \"cf16040b", "tree_hash_before"),
        (0, "\"tree_hash_after\": \"af8003e9", "\"tree_hash_after\": \"af8003e8", "tree_hash_after"),
        // The first leaf's encryption key in the expected tree.
        (0, "\"tree_after\": \"4a53010120851", "\"tree_after\": \"4a53010120852", "tree_after"),
        // The update applied at leaf 2 instead of 3.
        (2, "\"proposal_sender\": 3,", "\"proposal_sender\": 2,", "tree_after"),
    ])
    func aTreeOperationsFileWithOneByteChangedFails(index: Int, original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("tree-operations.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "tree-operations.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[index] == .failed(reason: reason))
    }

    // MARK: tree-validation.json

    @Test func everyTreeValidationCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "tree-validation.json", contents: try VectorFiles.load("tree-validation.json"))
        Self.expectSuites1And3Pass(report, cases: 98, per: 14)
    }

    @Test(arguments: [
        ("\"135d5ae4", "\"135d5ae5", "tree hash of node 2"),
        ("[\n        1\n      ]", "[\n        3\n      ]", "resolution of node 1"),
        // Leaf 0 is a committer's, signed for the group: another group id breaks its signature.
        ("\"group_id\": \"99eb8e58", "\"group_id\": \"99eb8e59", "validation: invalidSignature"),
    ])
    func aTreeValidationFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("tree-validation.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "tree-validation.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }

    // MARK: treekem.json

    @Test func everyTreeKEMCaseOfSuites1And3Passes() throws {
        let report = try MLSTestVectors.check(file: "treekem.json", contents: try VectorFiles.load("treekem.json"))
        Self.expectSuites1And3Pass(report, cases: 77, per: 11)
    }

    @Test(arguments: [
        ("\"commit_secret\": \"5ccc25c825", "\"commit_secret\": \"5ccc25c826", "update_paths[0]: leaf 1: commit_secret"),
        ("null,\n          \"e8608097b9", "null,\n          \"e8608097ba", "update_paths[0]: path_secrets[1]"),
        ("\"tree_hash_after\": \"e90f531363", "\"tree_hash_after\": \"e90f531364", "update_paths[0]: tree_hash_after"),
        // Leaf 0's path secret of the root no longer gives the root's public key.
        ("\"path_secret\": \"8313fdeaeb", "\"path_secret\": \"8313fdeaec", "leaves_private[0]: publicKeyMismatch(node: 1)"),
        // The last ciphertext of the update path, and the GroupContext the path secrets were encrypted under.
        ("9104889432\"", "9104889433\"", "update_paths[0]: leaf 1 processing: decryptionFailed"),
        ("\"epoch\": 28061", "\"epoch\": 28062", "update_paths[0]: leaf 1 processing: decryptionFailed"),
        // The committer's new leaf's encryption key: its signature no longer verifies.
        ("\"update_path\": \"20b3", "\"update_path\": \"20b4", "update_paths[0]: merge: invalidSignature"),
    ])
    func aTreeKEMFileWithOneByteChangedFails(original: String, replacement: String, reason: String) throws {
        let changed = try VectorFiles.changingOneByte(try VectorFiles.load("treekem.json"), original, to: replacement)
        let report = try MLSTestVectors.check(file: "treekem.json", contents: changed)
        #expect(report.failed == 1)
        #expect(report.outcomes[0] == .failed(reason: reason))
    }
}
