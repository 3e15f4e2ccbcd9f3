import CEditLine
import Foundation

/// The REPL's terminal: libedit's line editor (emacs keys, history, Tab) on a thread of its
/// own that alone touches the terminal. That thread polls stdin and a wake-up pipe; between
/// keys it prints queued lines above the line being typed, then has libedit draw the prompt
/// and the half-typed line again. Other threads only queue (`print`). Thin on purpose: what
/// to print and what Tab inserts is decided by pure types (REPLScreen, REPLCompletion).
final class LineEditor: @unchecked Sendable {
    /// Given the text before the cursor, what Tab inserts and which alternatives to show.
    typealias Completer = @Sendable (String) -> (insert: String, alternatives: [String])

    let lines: AsyncStream<String>
    private let lineSink: AsyncStream<String>.Continuation
    private let completer: Completer
    /// Told the line so far after each key that does not end it (on the editor thread).
    private let edited: @Sendable (String) -> Void
    private let historyPath: String?
    private let lock = NSLock()
    private var queued: [String] = []
    private var stopping = false
    private var running = false
    private let wake: (read: Int32, write: Int32)
    private let finished = DispatchSemaphore(value: 0)
    // Confined to the editor thread (and set before it starts).
    private var editLine: OpaquePointer?
    private var history: OpaquePointer?
    // Confined to the editor thread after start: libedit reads the prompt while it draws.
    private var promptText: UnsafeMutablePointer<CChar>
    private var promptColumns: Int
    /// A new prompt to take between keys (`setPrompt`).
    private var nextPrompt: (text: String, columns: Int)?

    init(prompt: String, promptColumns: Int, historyPath: String?, completer: @escaping Completer,
         edited: @escaping @Sendable (String) -> Void = { _ in }) {
        (lines, lineSink) = AsyncStream.makeStream(of: String.self)
        self.completer = completer
        self.edited = edited
        self.historyPath = historyPath
        self.promptColumns = promptColumns
        promptText = strdup(prompt)
        var fds: [Int32] = [0, 0]
        if pipe(&fds) != 0 { fds = [-1, -1] }
        // A full pipe already means "wake up": a writer must never block on it.
        _ = fcntl(fds[1], F_SETFL, O_NONBLOCK)
        wake = (fds[0], fds[1])
    }

    deinit {
        free(promptText)
        close(wake.read)
        close(wake.write)
    }

    /// The history's entries, newest first (to learn user names from).
    func start() -> [String] {
        history = simp_history_open(1000)
        if let history, let historyPath { _ = simp_history_load(history, historyPath) }
        let entries = historyEntries()
        // libedit reads multibyte characters by the locale; Swift's runtime leaves it at "C".
        setlocale(LC_CTYPE, "")
        // fdopen, not the C globals stdin/stdout, which Swift 6 sees as shared mutable state.
        editLine = el_init("simp", fdopen(STDIN_FILENO, "r"), fdopen(STDOUT_FILENO, "w"), fdopen(STDERR_FILENO, "w"))
        guard let editLine else { return entries }
        simp_el_configure(editLine, history, { el in LineEditor.owner(el)?.promptText }, { el, _ in
            LineEditor.owner(el)?.complete() ?? UInt8(CC_NORM)
        }, Unmanaged.passUnretained(self).toOpaque())
        running = true
        Thread { [self] in run() }.start()
        return entries
    }

    /// Prints `text` above the line being typed (directly when the editor is not running).
    func print(_ text: [String]) {
        guard !text.isEmpty else { return }
        lock.lock()
        let direct = !running
        if !direct { queued += text }
        lock.unlock()
        if direct {
            FileHandle.standardOutput.write(Data(text.map { $0 + "\n" }.joined().utf8))
        } else {
            wakeUp()
        }
    }

    /// Shows `prompt` (taking `columns` on the terminal) from now on, for the line being typed too.
    func setPrompt(_ prompt: String, columns: Int) {
        lock.lock()
        nextPrompt = (prompt, columns)
        lock.unlock()
        wakeUp()
    }

    /// Stops reading, prints what is queued, puts the terminal back as it was; waits for it.
    func stop() {
        lock.lock()
        let wasRunning = running
        stopping = true
        lock.unlock()
        guard wasRunning else { return }
        wakeUp()
        finished.wait()
    }

    private func wakeUp() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    private static func owner(_ el: OpaquePointer?) -> LineEditor? {
        guard let el, let data = simp_el_clientdata(el) else { return nil }
        return Unmanaged<LineEditor>.fromOpaque(data).takeUnretainedValue()
    }

    // MARK: the editor thread

    private func run() {
        guard let editLine else { return }
        simp_el_unbuffered(editLine, 1)
        var fds = [pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
        while !isStopping() {
            takeNextPrompt()
            drainQueue()
            if poll(&fds, 2, -1) < 0 {
                // Interrupted (SIGWINCH): revents are not to be trusted, poll again.
                if errno == EINTR { continue }
                break
            }
            if fds[1].revents != 0 { drainWakeups() }
            if fds[0].revents & Int16(POLLERR | POLLNVAL) != 0 { break }
            if fds[0].revents & Int16(POLLIN | POLLHUP) != 0, !readKey(editLine) { break }
        }
        finish(editLine)
    }

    /// One key (or key sequence) into libedit; false at end of input.
    private func readKey(_ editLine: OpaquePointer) -> Bool {
        var count: Int32 = 0
        // Unbuffered, libedit answers each key with the line so far. NULL with -1: the line is
        // empty, editing goes on; NULL with 0: stdin ended; Ctrl-D on an empty line: "\u{4}".
        guard let buffer = el_gets(editLine, &count) else { return count != 0 }
        guard count > 0 else { return true }
        if count == 1 && buffer[0] == 4 { return false }
        let last = buffer[Int(count) - 1]
        guard last == 0x0A || last == 0x0D else {
            edited(String(decoding: UnsafeRawBufferPointer(start: buffer, count: Int(count)), as: UTF8.self))
            return true
        }
        let line = String(decoding: UnsafeRawBufferPointer(start: buffer, count: Int(count) - 1), as: UTF8.self)
        // Off and on again: libedit ends the line and starts a fresh one with a new prompt.
        simp_el_unbuffered(editLine, 0)
        remember(line)
        lineSink.yield(line)
        simp_el_unbuffered(editLine, 1)
        return true
    }

    private func remember(_ line: String) {
        guard let history, !line.trimmingCharacters(in: .whitespaces).isEmpty else { return }
        simp_history_enter(history, line)
        guard let historyPath else { return }
        _ = simp_history_save(history, historyPath)
        chmod(historyPath, 0o600)
    }

    /// Erases the line drawn with the old prompt, and draws it again with the new one.
    private func takeNextPrompt() {
        lock.lock()
        let next = nextPrompt
        nextPrompt = nil
        lock.unlock()
        guard let next, let editLine else { return }
        let erase = clearPromptRows(editLine)
        free(promptText)
        promptText = strdup(next.text)
        promptColumns = next.columns
        FileHandle.standardOutput.write(Data(erase.utf8))
        simp_el_refresh(editLine)
    }

    /// Queued lines go above the prompt: erase the prompt's rows, print, draw the prompt again.
    private func drainQueue() {
        lock.lock()
        let text = queued
        queued.removeAll()
        lock.unlock()
        guard !text.isEmpty, let editLine else { return }
        let out = clearPromptRows(editLine) + text.map { $0 + "\r\n" }.joined()
        FileHandle.standardOutput.write(Data(out.utf8))
        simp_el_refresh(editLine)
    }

    /// Back to column 0 of the prompt's first row and erase to the end of the screen.
    private func clearPromptRows(_ editLine: OpaquePointer) -> String {
        guard let info = el_line(editLine)?.pointee else { return "\r\u{1B}[J" }
        let typed = UnsafeRawBufferPointer(start: info.buffer, count: info.cursor - info.buffer)
        let columns = promptColumns + String(decoding: typed, as: UTF8.self).count
        let rowsUp = columns / Int(simp_terminal_columns(STDOUT_FILENO))
        return (rowsUp > 0 ? "\u{1B}[\(rowsUp)A" : "") + "\r\u{1B}[J"
    }

    private func drainWakeups() {
        var buffer = [UInt8](repeating: 0, count: 256)
        _ = read(wake.read, &buffer, buffer.count)
    }

    private func isStopping() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopping
    }

    private func finish(_ editLine: OpaquePointer) {
        drainQueue()
        FileHandle.standardOutput.write(Data("\r\u{1B}[J".utf8))
        simp_el_unbuffered(editLine, 0)
        el_end(editLine)
        if let history { history_end(history) }
        lock.lock()
        running = false
        let rest = queued
        queued.removeAll()
        lock.unlock()
        if !rest.isEmpty { FileHandle.standardOutput.write(Data(rest.map { $0 + "\n" }.joined().utf8)) }
        lineSink.finish()
        finished.signal()
    }

    /// Tab: inserts what the completer says; alternatives are printed above the line.
    private func complete() -> UInt8 {
        guard let editLine, let info = el_line(editLine)?.pointee else { return UInt8(CC_ERROR) }
        let before = String(decoding: UnsafeRawBufferPointer(start: info.buffer, count: info.cursor - info.buffer), as: UTF8.self)
        let result = completer(before)
        if !result.insert.isEmpty { _ = el_insertstr(editLine, result.insert) }
        if !result.alternatives.isEmpty {
            lock.lock()
            queued.append(result.alternatives.joined(separator: "  "))
            lock.unlock()
        }
        return UInt8(result.insert.isEmpty && result.alternatives.isEmpty ? CC_REFRESH_BEEP : CC_REFRESH)
    }

    private func historyEntries() -> [String] {
        guard let history else { return [] }
        var entries: [String] = []
        var entry = simp_history_first(history)
        while let current = entry {
            entries.append(String(cString: current))
            entry = simp_history_next(history)
        }
        return entries
    }
}
