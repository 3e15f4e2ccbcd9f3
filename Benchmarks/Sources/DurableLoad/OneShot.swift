import Foundation

/// A value one thread sets once and tasks await; later sets are ignored.
final class OneShot<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value?
    private var waiters: [CheckedContinuation<Value, Never>] = []

    func set(_ newValue: Value) {
        let waiting: [CheckedContinuation<Value, Never>]? = lock.withLock {
            guard value == nil else { return nil }
            value = newValue
            defer { waiters = [] }
            return waiters
        }
        for waiter in waiting ?? [] { waiter.resume(returning: newValue) }
    }

    func get() async -> Value {
        await withCheckedContinuation { continuation in
            let ready: Value? = lock.withLock {
                if value == nil { waiters.append(continuation) }
                return value
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
