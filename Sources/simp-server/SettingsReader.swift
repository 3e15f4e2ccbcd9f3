/// Reads each setting from its flag, else its environment variable, else its default, and
/// remembers which it was: `--print-config` shows an operator what the server would run with
/// and why.
struct SettingsReader {
    struct Entry {
        let name: String
        let value: String
        let source: String
    }

    let environment: [String: String]
    private(set) var entries: [Entry] = []

    init(environment: [String: String]) {
        self.environment = environment
    }

    /// A setting with only a flag.
    mutating func read<T>(_ name: String, flag: T?, default fallback: T, show: (T) -> String = { "\($0)" }) -> T {
        let value = flag ?? fallback
        entries.append(Entry(name: name, value: show(value), source: flag == nil ? "default" : "flag"))
        return value
    }

    /// A setting with a flag and an environment variable.
    mutating func read<T>(_ name: String, flag: T?, env key: String, default fallback: T,
                          parse: (String) throws -> T, show: (T) -> String = { "\($0)" }) throws -> T {
        let found = try lookUp(flag: flag, env: key, parse: parse)
        let value = found?.value ?? fallback
        entries.append(Entry(name: name, value: show(value), source: found?.source ?? "default"))
        return value
    }

    /// A setting that is off unless given; `absent` says what that means.
    mutating func readOptional<T>(_ name: String, flag: T?, env key: String, absent: String,
                                  parse: (String) throws -> T, show: (T) -> String = { "\($0)" }) throws -> T? {
        let found = try lookUp(flag: flag, env: key, parse: parse)
        entries.append(Entry(name: name, value: found.map { show($0.value) } ?? absent, source: found?.source ?? "default"))
        return found?.value
    }

    /// One `name = value  (source)` line per setting, in the order they were read.
    var text: String {
        entries.map { "\($0.name) = \($0.value)  (\($0.source))" }.joined(separator: "\n")
    }

    private func lookUp<T>(flag: T?, env key: String, parse: (String) throws -> T) throws -> (value: T, source: String)? {
        if let flag { return (flag, "flag") }
        if let text = environment[key] { return (try parse(text), "env \(key)") }
        return nil
    }
}

/// A URL with the password of its user part (`redis://user:password@host`) replaced by `***`,
/// so it may be printed or logged.
func maskingPassword(_ url: String) -> String {
    guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@") else { return url }
    let userInfo = url[scheme.upperBound..<at]
    let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] + ":" } ?? ""
    return url[..<scheme.upperBound] + user + "***" + url[at...]
}
