import CFuzzDriver
import Foundation
import SIMPFuzzTargets

// Built with -sanitize=fuzzer and -DSIMP_LIBFUZZER (scripts/fuzz.sh), main hands over to
// libFuzzer with the target named by SIMP_FUZZ_TARGET. Built normally,
// `simp-fuzz TARGET FILE|DIR...` replays inputs (a corpus, a crasher) through a target.

@main
struct SIMPFuzz {
    static func main() {
        #if SIMP_LIBFUZZER
        fuzz()
        #else
        replay(Array(CommandLine.arguments.dropFirst()))
        #endif
    }

    #if SIMP_LIBFUZZER
    /// libFuzzer takes over with the command line (corpus directories, -max_total_time ...).
    static func fuzz() -> Never {
        let name = ProcessInfo.processInfo.environment["SIMP_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fail("set SIMP_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue))")
        }
        selected = target
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, count in fuzzOneInput(data, count) })
    }

    nonisolated(unsafe) static var selected: FuzzTarget?
    #endif

    static func replay(_ arguments: [String]) {
        guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count >= 2 else {
            fail("usage: simp-fuzz \(FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")) FILE|DIR...")
        }
        var count = 0
        for path in arguments.dropFirst() {
            for file in inputs(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                target.run(Array(data))
                count += 1
            }
        }
        print("simp-fuzz: \(count) inputs through \(target.rawValue), no crash")
    }

    static func inputs(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { fail("simp-fuzz: no such file \(path)") }
        guard isDirectory.boolValue else { return [path] }
        return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(2)
    }
}

#if SIMP_LIBFUZZER
/// libFuzzer's runtime refers to this symbol even when the driver is handed a callback.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    SIMPFuzz.selected?.run(bytes)
    return 0
}
#endif
