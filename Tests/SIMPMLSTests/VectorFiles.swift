import Foundation
import Testing

/// The official vector files committed under Vectors/ (mlswg/mls-implementations test-vectors/).
enum VectorFiles {
    static func load(_ name: String) throws -> Data {
        let base = try #require(Bundle.module.resourceURL)
        return try Data(contentsOf: base.appendingPathComponent("Vectors").appendingPathComponent(name))
    }

    /// `data` with the first occurrence of `original` replaced by `replacement`, which must be the
    /// same length and differ in exactly one byte.
    static func changingOneByte(_ data: Data, _ original: String, to replacement: String) throws -> Data {
        let a = Array(original.utf8), b = Array(replacement.utf8)
        try #require(a.count == b.count && zip(a, b).filter { $0 != $1 }.count == 1)
        let bytes = Array(data)
        let start = try #require((0...(bytes.count - a.count)).first { bytes[$0..<($0 + a.count)].elementsEqual(a) })
        var changed = bytes
        changed.replaceSubrange(start..<(start + a.count), with: b)
        #expect(zip(bytes, changed).filter { $0 != $1 }.count == 1)
        return Data(changed)
    }
}
