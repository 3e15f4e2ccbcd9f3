#!/usr/bin/env bash
# Builds simp-fuzz with libFuzzer (swiftc -sanitize=fuzzer) and runs each target.
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   targets: frames datagrams envelopes tokens mls-message mls-ratchet-tree device-link
# SIMP_FUZZ_CONFIG=release builds optimised (for long runs); the default, debug, builds faster.
# Seeds and every crasher ever found live in Tests/FuzzCorpus/TARGET and are replayed by the
# unit tests; the growing corpus stays in .build-fuzz/corpus. A crash exits non-zero and
# leaves the input in .build-fuzz/crash-TARGET-*.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
shift || true
targets=${*:-frames datagrams envelopes tokens mls-message mls-ratchet-tree device-link}
config=${SIMP_FUZZ_CONFIG:-debug}
swift build -c "$config" --scratch-path .build-fuzz --product simp-fuzz \
  -Xswiftc -sanitize=fuzzer -Xswiftc -DSIMP_LIBFUZZER
bin=.build-fuzz/$config/simp-fuzz
for target in $targets; do
  corpus=.build-fuzz/corpus/$target
  mkdir -p "$corpus"
  echo "== fuzzing $target for ${seconds}s"
  SIMP_FUZZ_TARGET=$target "$bin" -max_total_time="$seconds" -max_len=70000 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=".build-fuzz/crash-$target-" "$corpus" "Tests/FuzzCorpus/$target"
done
