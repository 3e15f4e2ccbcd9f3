import SIMPClient
/// Text from other people (message text, names, image URLs, the server's reasons) made safe
/// to print on a terminal. A terminal obeys control characters: ESC sequences can clear the
/// screen or move the cursor, a newline or carriage return can fake a line "from" someone
/// else, and bidi overrides can reorder what is shown. Each such character is shown escaped
/// in a visible form instead, and a backslash as `\\`, so that no message can pass for an
/// escape either: the shown text says exactly what was sent.
public enum TerminalText {
    /// `text` with every control, bidi-control and line-separator character escaped:
    /// `\e` (ESC), `\n`, `\r`, `\t`, `\\`, `\x07` (other C0 and DEL), `\u{9b}` (C1 and the
    /// Unicode formatting characters).
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                out += escape(scalar)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x5C, 0x7F...0x9F: return true
        // Bidi embeddings and overrides (LRE RLE PDF LRO RLO), isolates (LRI RLI FSI PDI).
        case 0x202A...0x202E, 0x2066...0x2069: return true
        // Line and paragraph separators: a line break to some terminals and most viewers.
        case 0x2028, 0x2029: return true
        default: return false
        }
    }

    private static func escape(_ scalar: Unicode.Scalar) -> String {
        switch scalar.value {
        case 0x1B: return "\\e"
        case 0x0A: return "\\n"
        case 0x0D: return "\\r"
        case 0x09: return "\\t"
        case 0x5C: return "\\\\"
        case 0x00...0x1F, 0x7F: return "\\x" + hex(scalar.value, width: 2)
        default: return "\\u{" + hex(scalar.value, width: 1) + "}"
        }
    }

    private static func hex(_ value: UInt32, width: Int) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
