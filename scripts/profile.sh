#!/usr/bin/env bash
# Profiles simp-server, redis-server and simp-bench under load with perf (Debian's linux-perf):
# builds (scripts/build-bench.sh) and starts simp-bench --spawn (release), records each process
# for a few seconds in the middle of the measured window, and prints each one's hottest
# functions (inclusive).
# Usage: scripts/profile.sh [OUTDIR] [simp-bench arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/simp-profile}; shift || true
mkdir -p "$out"
command -v perf >/dev/null || { echo "perf not found: apt-get install linux-perf" >&2; exit 1; }
bin=$(scripts/build-bench.sh)
"$bin/simp-bench" --spawn --duration 10 "$@" >"$out/bench.txt" 2>&1 &
bench=$!
sleep 5
server=$(pgrep -f "^$bin/simp-server" | head -1)
redis=$(pgrep -P "$bench" -f redis-server | head -1)
for name in server redis bench; do
  pid=${!name}
  perf record -F 499 -g -p "$pid" -o "$out/$name.perf" -- sleep 4 >/dev/null 2>&1 &
done
wait "$bench" || true
sleep 1
for name in server redis bench; do
  echo "== $name"
  perf report -i "$out/$name.perf" --children --sort symbol --stdio -g none 2>/dev/null \
    | grep -E "^ +[0-9]" | swift demangle --simplified | cut -c1-150 | head -${TOP:-40} || true
done > "$out/report.txt"
cat "$out/bench.txt" | grep -v -E '^[0-9]+:[CM] '
echo "profiles and report in $out" >&2
