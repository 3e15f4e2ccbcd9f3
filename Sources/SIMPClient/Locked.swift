import Foundation

/// A value behind a lock: set on the client's loop, read anywhere.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) {
        stored = value
    }

    var value: Value {
        get {
            lock.lock()
            defer { lock.unlock() }
            return stored
        }
        set {
            lock.lock()
            stored = newValue
            lock.unlock()
        }
    }

    /// Sets `new` and returns what was there, in one step.
    func exchange(_ new: Value) -> Value {
        lock.lock()
        defer { lock.unlock() }
        let old = stored
        stored = new
        return old
    }

    /// Changes the value in one step and returns what `body` returns.
    func withLock<Result>(_ body: (inout Value) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&stored)
    }
}
