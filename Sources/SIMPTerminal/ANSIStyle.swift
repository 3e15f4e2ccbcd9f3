import SIMPClient
/// Colour for the REPL on a terminal: plain ANSI SGR sequences around a piece of text, or the
/// text unchanged when colour is off (output not a terminal, or `NO_COLOR` set). Only text the
/// REPL itself chose goes into a style; what others wrote is escaped (TerminalText) first.
public struct ANSIStyle: Sendable, Equatable {
    public enum Tone: String, Sendable {
        case bold = "1"
        case dim = "2"
        case red = "31"
        case green = "32"
        case yellow = "33"
        case blue = "34"
        case magenta = "35"
        case cyan = "36"
    }

    public let enabled: Bool

    public init(enabled: Bool) { self.enabled = enabled }

    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty (https://no-color.org).
    public static func forOutput(isTerminal: Bool, environment: [String: String]) -> ANSIStyle {
        ANSIStyle(enabled: isTerminal && (environment["NO_COLOR"] ?? "").isEmpty)
    }

    public func paint(_ text: String, _ tones: Tone...) -> String {
        guard enabled, !tones.isEmpty, !text.isEmpty else { return text }
        return "\u{1B}[" + tones.map(\.rawValue).joined(separator: ";") + "m" + text + "\u{1B}[0m"
    }
}
