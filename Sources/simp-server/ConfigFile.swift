import Configuration
import Foundation

/// The optional config file (`--config FILE`, `SIMP_CONFIG`): one JSON object whose keys are
/// the settings' names, the long flags without their dashes (`"max-conns-per-ip": 64`).
/// swift-configuration's `JSONSnapshot` parses it and converts each value to the type asked
/// for; the file is read once, so a reload never sees half of an old file and half of a new one.
/// (swift-configuration needs macOS 15; this package still builds for 14, hence the annotation.)
@available(macOS 15, *)
struct ConfigFile: SettingsFile {
    let path: String
    /// The top-level names, in order: SettingsReader refuses those no setting reads.
    let keys: [String]
    private let snapshot: JSONSnapshot

    init(path: String) throws(SettingError) {
        self.path = path
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw SettingError("config file \(path): cannot read it: \(Self.reason(error))")
        }
        do {
            // swift-configuration offers no list of a snapshot's keys; JSONSerialization gives
            // the top-level names (nested objects are unknown keys too).
            guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                throw SettingError("config file \(path): the top level must be a JSON object { \"name\": value, ... }")
            }
            keys = object.keys.sorted()
            let bytes = [UInt8](data)
            snapshot = try JSONSnapshot(data: bytes.span.bytes, providerName: "file \(path)", parsingOptions: .default)
        } catch let error as SettingError {
            throw error
        } catch {
            throw SettingError("config file \(path): not valid JSON: \(Self.reason(error))")
        }
    }

    func int(_ key: String) throws(SettingError) -> Int? {
        guard case .int(let value)? = try content(key, .int, expected: "a whole number") else { return nil }
        return value
    }

    func double(_ key: String) throws(SettingError) -> Double? {
        guard case .double(let value)? = try content(key, .double, expected: "a number") else { return nil }
        return value
    }

    func string(_ key: String) throws(SettingError) -> String? {
        guard case .string(let value)? = try content(key, .string, expected: "a string") else { return nil }
        return value
    }

    func bool(_ key: String) throws(SettingError) -> Bool? {
        guard case .bool(let value)? = try content(key, .bool, expected: "true or false") else { return nil }
        return value
    }

    private func content(_ key: String, _ type: ConfigType, expected: String) throws(SettingError) -> ConfigContent? {
        do {
            return try snapshot.value(forKey: AbsoluteConfigKey([key]), type: type).value?.content
        } catch {
            // The library's message repeats the key; ours names the file too. The value is
            // not repeated: it might be something that should not be in a log.
            throw SettingError("config file \(path): \"\(key)\" must be \(expected)")
        }
    }

    private static func reason(_ error: any Error) -> String {
        (error as NSError).localizedDescription
    }
}

/// The config file as SettingsReader sees it.
protocol SettingsFile: Sendable {
    var path: String { get }
    var keys: [String] { get }
    func int(_ key: String) throws(SettingError) -> Int?
    func double(_ key: String) throws(SettingError) -> Double?
    func string(_ key: String) throws(SettingError) -> String?
    func bool(_ key: String) throws(SettingError) -> Bool?
}

/// A setting that cannot be used: its name, where it came from, and why.
struct SettingError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
