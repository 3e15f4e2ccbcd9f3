import NIOCore

/// Runs a task's jobs on one event loop. A task reading a client's `events` with this
/// preference is resumed on the client's own loop, and its `send`s find themselves there: no
/// event and no send crosses a thread (`SIMPClient.taskExecutor`).
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class LoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(loop: any EventLoop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
