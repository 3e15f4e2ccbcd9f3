import Foundation
import SIMPFuzzTargets

// Built with -sanitize=fuzzer and -DSIMP_LIBFUZZER (scripts/fuzz.sh), libFuzzer supplies
// main and calls the entry point below with the target named by SIMP_FUZZ_TARGET. Built
// normally, `simp-fuzz TARGET FILE...` replays inputs (a corpus, a crasher) through a target.

#if SIMP_LIBFUZZER
nonisolated(unsafe) let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["SIMP_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        fatalError("set SIMP_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue))")
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = start.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
    selectedTarget.run(bytes)
    return 0
}
#else
let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: simp-fuzz frames|datagrams|envelopes FILE|DIR...\n".utf8))
    exit(2)
}
var count = 0
for path in arguments.dropFirst() {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
        FileHandle.standardError.write(Data("simp-fuzz: no such file \(path)\n".utf8))
        exit(2)
    }
    let files = isDirectory.boolValue
        ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { "\(path)/\($0)" }
        : [path]
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { continue }
        target.run(Array(data))
        count += 1
    }
}
print("simp-fuzz: \(count) inputs through \(target.rawValue), no crash")
#endif
