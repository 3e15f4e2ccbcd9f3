import Foundation

// What the CLI prints keeps the wire's units: times as milliseconds since 1970, durations
// in milliseconds (the library hands out `Date` and `Duration`).

extension Date {
    /// Milliseconds since 1970, as `simp --json` prints times.
    public var millisSince1970: Int64 {
        Int64((timeIntervalSince1970 * 1000).rounded())
    }

    /// A time of the wire (milliseconds since 1970).
    public init(millisSince1970 millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }
}

extension Duration {
    /// Whole milliseconds, as `simp --json` prints delays.
    public var wholeMillis: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
