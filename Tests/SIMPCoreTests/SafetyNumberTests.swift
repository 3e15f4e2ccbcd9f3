import Crypto
import Foundation
import SIMPCore
import Testing

/// docs/vectors/safety-number.json comes from an implementation independent of this one
/// (scripts/safety-number-vectors.py, Python's hashlib): a known-answer test both ways.
@Suite struct SafetyNumberTests {
    struct File: Decodable {
        var iterations: Int
        var label: String
        var cases: [Case]
    }

    struct Case: Decodable {
        var user_a: String
        var identity_key_a: String
        var user_b: String
        var identity_key_b: String
        var fingerprint_a: String
        var fingerprint_b: String
        var safety_number: String
    }

    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/vectors/safety-number.json").standardized

    static func key(_ seed: UInt8) throws -> IdentityKey {
        let key = try Curve25519.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: seed, count: 32)).publicKey
        return try #require(IdentityKey(Array(key.rawRepresentation)))
    }

    @Test func theVectorsComputeHere() throws {
        let vectors = try JSONDecoder().decode(File.self, from: Data(contentsOf: Self.file))
        #expect(vectors.iterations == SafetyNumber.iterations)
        #expect(Array(vectors.label.utf8) == SafetyNumber.label)
        #expect(vectors.cases.count == 5)
        for vector in vectors.cases {
            let a = try #require(IdentityKey(VectorTests.bytes(vector.identity_key_a)))
            let b = try #require(IdentityKey(VectorTests.bytes(vector.identity_key_b)))
            #expect(SafetyNumber.fingerprint(user: vector.user_a, identity: a) == vector.fingerprint_a)
            #expect(SafetyNumber.fingerprint(user: vector.user_b, identity: b) == vector.fingerprint_b)
            let number = SafetyNumber((vector.user_a, a), (vector.user_b, b))
            #expect(number.description == vector.safety_number)
            #expect(number.digits.count == 60 && number.groups.count == 12)
        }
    }

    @Test func bothSidesSeeTheSameNumber() throws {
        let alice = try Self.key(1), bob = try Self.key(2)
        #expect(SafetyNumber(("alice", alice), ("bob", bob)) == SafetyNumber(("bob", bob), ("alice", alice)))
    }

    @Test func aNewIdentityOrAnotherNameChangesIt() throws {
        let alice = try Self.key(1), bob = try Self.key(2), newAlice = try Self.key(3)
        let before = SafetyNumber(("alice", alice), ("bob", bob))
        #expect(before != SafetyNumber(("alice", newAlice), ("bob", bob)))
        // The name is part of it: the same key under another name is another fingerprint.
        #expect(SafetyNumber.fingerprint(user: "alice", identity: alice) != SafetyNumber.fingerprint(user: "mallory", identity: alice))
    }

    @Test func whatAUserTypesMatchesWithOrWithoutSpaces() throws {
        let number = SafetyNumber(("alice", try Self.key(1)), ("bob", try Self.key(2)))
        #expect(number.matches(number.description))
        #expect(number.matches(number.digits))
        #expect(number.matches(" " + number.groups.joined(separator: "\n") + " "))
        var wrong = Array(number.digits)
        wrong[59] = wrong[59] == "0" ? "1" : "0"
        #expect(!number.matches(String(wrong)))
        #expect(!number.matches(String(number.digits.dropLast())))
    }
}
