import Foundation
import Testing

/// The library's public surface is in its own types (issue 47): no NIO type and no generated
/// protobuf type in any public declaration of Sources/SIMPClient, outside `@_spi(NIO)`. A
/// line scan, not the compiler's view: it follows public declarations (over several lines),
/// the cases of public enums and the requirements of public protocols.
@Suite struct PublicSurfaceTests {
    /// What must not appear: NIO's types and the generated `Simp_*` ones.
    static var leaked: Regex<AnyRegexOutput> {
        try! Regex(#"\b(TimeAmount|NIODeadline|EventLoop\w*|Channel|ByteBuffer|SocketAddress|AddressedEnvelope|Scheduled|NIO[A-Z]\w*|Simp_\w*|Frame|RetransmitPolicy)\b"#)
    }

    /// A public declaration's text, as one string per declaration, with its line number.
    static func publicDeclarations(in source: String) -> [(line: Int, text: String)] {
        let lines = source.components(separatedBy: "\n")
        var found: [(line: Int, text: String)] = []
        // Each open type body: the depth inside it, and which of its members are public without
        // saying so (a public enum's cases, a public protocol's requirements).
        enum Implicit { case none, cases, requirements }
        var bodies: [(depth: Int, implicit: Implicit)] = []
        var depth = 0
        var index = 0
        while index < lines.count {
            let code = Self.code(lines[index])
            let trimmed = code.trimmingCharacters(in: .whitespaces)
            let previous = index > 0 ? Self.code(lines[index - 1]).trimmingCharacters(in: .whitespaces) : ""
            let spi = trimmed.contains("@_spi(") || (previous.hasPrefix("@_spi(") && !previous.contains(" public "))
            let saysPublic = trimmed.range(of: #"(^|\s|\))(public|open (class|func|var|let|init|subscript|static|override|final))\b"#,
                                           options: .regularExpression) != nil
            let implicit = bodies.last.flatMap { $0.depth == depth ? $0.implicit : nil } ?? .none
            let isCase = trimmed.hasPrefix("case ") || trimmed.hasPrefix("indirect case ")
            let isRequirement = ["func ", "var ", "init", "associatedtype ", "nonisolated", "static ", "subscript"].contains { trimmed.hasPrefix($0) }
            let isMember = (implicit == .cases && isCase) || (implicit == .requirements && isRequirement)
            var consumed = 1
            if (saysPublic || isMember) && !spi {
                // The declaration, until its parentheses close.
                var text = trimmed
                var balance = Self.balance(trimmed)
                while balance > 0, !text.contains("{"), consumed < 12, index + consumed < lines.count {
                    let next = Self.code(lines[index + consumed]).trimmingCharacters(in: .whitespaces)
                    text += " " + next
                    balance += Self.balance(next)
                    consumed += 1
                }
                found.append((index + 1, text))
            }
            for offset in 0..<consumed {
                let line = Self.code(lines[index + offset])
                let opens = line.filter { $0 == "{" }.count, closes = line.filter { $0 == "}" }.count
                if offset == 0, opens > closes,
                   trimmed.range(of: #"\b(enum|protocol|struct|class|actor|extension)\s"#, options: .regularExpression) != nil {
                    let publicType = saysPublic && !spi
                    let implicit: Implicit = !publicType ? .none : trimmed.contains("enum ") ? .cases
                        : trimmed.contains("protocol ") ? .requirements : .none
                    bodies.append((depth + 1, implicit))
                }
                depth += opens - closes
                while let last = bodies.last, last.depth > depth { bodies.removeLast() }
            }
            index += consumed
        }
        return found
    }

    /// A line without its comment and string literals.
    static func code(_ line: String) -> String {
        var out = ""
        var inString = false
        var previous: Character = " "
        for character in line {
            if character == "\"" && previous != "\\" { inString.toggle(); previous = character; continue }
            if !inString && character == "/" && previous == "/" {
                out.removeLast()
                break
            }
            if !inString { out.append(character) }
            previous = character
        }
        return out
    }

    static func balance(_ text: String) -> Int {
        text.filter { $0 == "(" }.count - text.filter { $0 == ")" }.count
    }

    static func leaks(in source: String) -> [String] {
        publicDeclarations(in: source).filter { $0.text.contains(leaked) }.map { "\($0.line): \($0.text)" }
    }

    static var clientSources: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/SIMPClient")
    }

    @Test func noPublicDeclarationOfTheClientLibraryNamesANIOOrGeneratedType() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.clientSources.path).filter { $0.hasSuffix(".swift") }
        #expect(files.count > 20, "the sources are found")
        var leaks: [String] = []
        var declarations = 0
        for file in files.sorted() {
            let source = try String(contentsOf: Self.clientSources.appendingPathComponent(file), encoding: .utf8)
            declarations += Self.publicDeclarations(in: source).count
            leaks += Self.leaks(in: source).map { "\(file):\($0)" }
        }
        #expect(declarations > 100, "the public declarations are found")
        #expect(leaks.isEmpty, "public declarations with NIO or generated protobuf types:\n\(leaks.joined(separator: "\n"))")
    }

    /// The scan finds what it is for: a leak in a public declaration over several lines, in a
    /// public enum's case and in a public protocol's requirement; not in internal code, a
    /// comment or an `@_spi(NIO)` declaration.
    @Test func theScanFindsLeaksAndOnlyThem() {
        let source = """
        public struct Config {
            public var timeout: TimeAmount = .seconds(1)
            /// Not `Simp_Message`: a comment.
            public var name = "Frame"
            var loop: any EventLoop
            public init(a: Int,
                        group: any EventLoopGroup) {}
            @_spi(NIO) public var eventLoop: any EventLoop { loop }
            enum Inner { case wire(Simp_Envelope) }
        }
        public enum Event {
            case failed(code: Simp_ErrorCode?)
            case fine(Int)
            enum Hidden { case wire(Simp_Envelope) }
        }
        public protocol Messaging {
            func send(_ buffer: ByteBuffer)
        }
        """
        let leaks = Self.leaks(in: source)
        #expect(leaks.count == 4, "\(leaks)")
        #expect(leaks.contains { $0.hasPrefix("2:") } && leaks.contains { $0.hasPrefix("6:") })
        #expect(leaks.contains { $0.hasPrefix("12:") } && leaks.contains { $0.hasPrefix("17:") })
    }
}
