/// Reads each setting from its flag, else its environment variable, else the config file, else
/// its default, and remembers which it was: `--print-config` shows an operator what the server
/// would run with and why, and a reload logs what changed.
///
/// One name per setting: the flag is `--NAME`, the file key `NAME`, the environment variable
/// `SIMP_NAME` upper-cased with `_` for `-` (`max-conns-per-ip`: `SIMP_MAX_CONNS_PER_IP`),
/// except `redis`, whose variable has always been `SIMP_REDIS_URL`.
struct SettingsReader {
    struct Entry: Equatable, Sendable {
        let name: String
        let value: String
        let source: String
    }

    let environment: [String: String]
    let file: (any SettingsFile)?
    private(set) var entries: [Entry] = []

    init(environment: [String: String], file: (any SettingsFile)?) {
        self.environment = environment
        self.file = file
    }

    static func environmentName(of name: String) -> String {
        if name == "redis" { return "SIMP_REDIS_URL" }
        return "SIMP_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    mutating func read<T: SettingValue>(_ name: String, flag: T?, default fallback: T, rule: Rule<T> = .any,
                                        show: (T) -> String = { "\($0)" }) throws(SettingError) -> T {
        let found = try lookUp(name, flag: flag, rule: rule, show: show)
        let value = found?.value ?? fallback
        entries.append(Entry(name: name, value: show(value), source: found?.source ?? "default"))
        return value
    }

    /// A setting that is off unless given; `absent` says what that means.
    mutating func readOptional<T: SettingValue>(_ name: String, flag: T?, absent: String, rule: Rule<T> = .any,
                                                show: (T) -> String = { "\($0)" }) throws(SettingError) -> T? {
        let found = try lookUp(name, flag: flag, rule: rule, show: show)
        entries.append(Entry(name: name, value: found.map { show($0.value) } ?? absent, source: found?.source ?? "default"))
        return found?.value
    }

    /// A setting read elsewhere (the config file's own path), for the listing.
    mutating func note(_ name: String, value: String, source: String) {
        entries.append(Entry(name: name, value: value, source: source))
    }

    /// After every setting was read: a file key that no setting read is a typo or a setting
    /// this version does not have, and running with the default instead would surprise.
    func checkFileKeys() throws(SettingError) {
        guard let file else { return }
        if file.keys.contains("redis-password") {
            throw SettingError("config file \(file.path): \"redis-password\" is not read from a file; name a file holding it with \"redis-password-file\", or set SIMP_REDIS_PASSWORD")
        }
        // The file cannot name itself.
        let read = Set(entries.map(\.name)).subtracting(["config"])
        if let unknown = file.keys.first(where: { !read.contains($0) }) {
            throw SettingError("config file \(file.path): unknown key \"\(unknown)\"; the keys are the flag names without --, listed in docs/OPERATIONS.md")
        }
    }

    /// One `name = value  (source)` line per setting, in the order they were read.
    var text: String {
        entries.map { "\($0.name) = \($0.value)  (\($0.source))" }.joined(separator: "\n")
    }

    private func lookUp<T: SettingValue>(_ name: String, flag: T?, rule: Rule<T>,
                                         show: (T) -> String) throws(SettingError) -> (value: T, source: String)? {
        let found: (value: T, source: String)?
        let key = Self.environmentName(of: name)
        if let flag {
            found = (flag, "flag")
        } else if let text = environment[key] {
            guard let value = T(settingText: text) else {
                throw SettingError("environment \(key)=\(text): \(name) must be \(T.expected)")
            }
            found = (value, "env \(key)")
        } else if let file, let value = try T.read(from: file, key: name) {
            found = (value, "file \(file.path)")
        } else {
            found = nil
        }
        if let found, !rule.allows(found.value) {
            throw SettingError("\(name) = \(show(found.value)) (\(found.source)): \(rule.text)")
        }
        return found
    }
}

/// A type a setting can have: parsed from an environment variable's text, or read typed from
/// the config file.
protocol SettingValue {
    init?(settingText: String)
    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> Self?
    /// What a bad value should have been, for the error message.
    static var expected: String { get }
}

extension Int: SettingValue {
    init?(settingText: String) { self.init(settingText) }
    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> Int? { try file.int(key) }
    static var expected: String { "a whole number" }
}

extension Double: SettingValue {
    init?(settingText: String) { self.init(settingText) }
    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> Double? { try file.double(key) }
    static var expected: String { "a number" }
}

extension Bool: SettingValue {
    /// The spellings environment files and unit files use.
    init?(settingText: String) {
        switch settingText.lowercased() {
        case "1", "true", "yes", "on": self = true
        case "0", "false", "no", "off": self = false
        default: return nil
        }
    }

    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> Bool? { try file.bool(key) }
    static var expected: String { "true or false (or yes, no, 1, 0)" }
}

extension String: SettingValue {
    init?(settingText: String) { self = settingText }
    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> String? { try file.string(key) }
    static var expected: String { "a string" }
}

/// A value read as text with a fixed set of spellings (log level, log format).
protocol TextSettingValue: SettingValue, RawRepresentable<String>, CaseIterable {}

extension TextSettingValue {
    init?(settingText: String) { self.init(rawValue: settingText.lowercased()) }

    static func read(from file: any SettingsFile, key: String) throws(SettingError) -> Self? {
        guard let text = try file.string(key) else { return nil }
        guard let value = Self(settingText: text) else {
            throw SettingError("config file \(file.path): \"\(key)\" must be \(expected)")
        }
        return value
    }

    static var expected: String {
        let names = allCases.map(\.rawValue)
        return "one of " + names.joined(separator: ", ")
    }
}

/// What a value must satisfy beyond its type.
struct Rule<T> {
    let allows: (T) -> Bool
    let text: String

    static var any: Rule<T> { Rule(allows: { _ in true }, text: "") }
}

extension Rule where T == Int {
    static var positive: Rule<Int> { Rule(allows: { $0 > 0 }, text: "must be at least 1") }
    static var notNegative: Rule<Int> { Rule(allows: { $0 >= 0 }, text: "must be 0 or more") }
    static var port: Rule<Int> { Rule(allows: { (0...65535).contains($0) }, text: "must be a port number, 0 to 65535") }
}

extension Rule where T == Double {
    static var positive: Rule<Double> { Rule(allows: { $0 > 0 }, text: "must be more than 0") }
    static var notNegative: Rule<Double> { Rule(allows: { $0 >= 0 }, text: "must be 0 or more") }
}

/// Whether `--redis` names a Redis Cluster; `auto` asks it.
enum RedisClusterSetting: String, TextSettingValue {
    case auto, yes, no

    var isCluster: Bool? {
        switch self {
        case .auto: nil
        case .yes: true
        case .no: false
        }
    }
}
