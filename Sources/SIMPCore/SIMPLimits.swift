/// Names that the server accepts as user names: 1-32 of [a-z0-9_.-], starting with a letter or digit.
public enum UserName {
    public static func isValid(_ name: String) -> Bool {
        guard (1...32).contains(name.utf8.count), let first = name.utf8.first else { return false }
        func allowed(_ c: UInt8) -> Bool {
            (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c == 0x5f || c == 0x2e || c == 0x2d
        }
        return name.utf8.allSatisfy(allowed) && first != 0x2e && first != 0x2d && first != 0x5f
    }
}
