import SIMPClient
import SIMPTerminal
import Testing

@Suite struct TerminalTextTests {
    @Test func plainTextIsUnchanged() {
        for text in ["", "hello bob", "héllo wörld 👋🏽 日本語", "https://example.org/a.png?x=1&y=2"] {
            #expect(TerminalText.escaped(text) == text)
        }
    }

    @Test func escapeSequencesAndLineBreaksAreShownNotObeyed() {
        #expect(TerminalText.escaped("\u{1B}[2J\u{1B}[H") == #"\e[2J\e[H"#)
        #expect(TerminalText.escaped("hi\nmallory: fake") == #"hi\nmallory: fake"#)
        #expect(TerminalText.escaped("a\r\tb") == #"a\r\tb"#)
        #expect(TerminalText.escaped("bell\u{07}nul\u{00}del\u{7F}") == #"bell\x07nul\x00del\x7f"#)
    }

    @Test func c1ControlsAndBidiOverridesAreShownAsCodePoints() {
        #expect(TerminalText.escaped("\u{9B}31m") == #"\u{9b}31m"#)
        #expect(TerminalText.escaped("\u{85}\u{80}") == #"\u{85}\u{80}"#)
        #expect(TerminalText.escaped("abc\u{202E}fdp.exe") == #"abc\u{202e}fdp.exe"#)
        #expect(TerminalText.escaped("\u{2066}x\u{2069}") == #"\u{2066}x\u{2069}"#)
        #expect(TerminalText.escaped("line\u{2028}break") == #"line\u{2028}break"#)
    }

    /// A backslash is escaped too, so typed text cannot pass for an escaped control character.
    @Test func aTypedBackslashCannotImitateAnEscape() {
        #expect(TerminalText.escaped(#"\e[2J"#) == #"\\e[2J"#)
        #expect(TerminalText.escaped(#"\e[2J"#) != TerminalText.escaped("\u{1B}[2J"))
    }

    /// Whatever goes in, what comes out has no character a terminal would act on.
    @Test func noDangerousScalarSurvives() {
        let dangerous: [ClosedRange<UInt32>] = [0x00...0x1F, 0x7F...0x9F, 0x202A...0x202E, 0x2066...0x2069, 0x2028...0x2029]
        var input = ""
        for range in dangerous { for value in range { input.unicodeScalars.append(Unicode.Scalar(value)!) } }
        let output = TerminalText.escaped(input + "tail")
        #expect(!output.unicodeScalars.contains { scalar in dangerous.contains { $0.contains(scalar.value) } })
        #expect(output.hasSuffix("tail"))
    }
}
