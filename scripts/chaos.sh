#!/usr/bin/env bash
# A short simp-chaos run for CI: seeded faults against the debug build's simp-server, simp and
# a redis-server, then the checker over every client's log. Builds nothing: it runs what
# `swift build --build-tests` (scripts/test.sh) left in .build/debug.
# The seed is random unless SIMP_CHAOS_SEED is set; it is printed first, and a failed run
# prints the command that repeats its plan. Exits non-zero on any violation.
# Usage: [SIMP_CHAOS_SEED=S] [SIMP_CHAOS_DURATION=45] [SIMP_CHAOS_TOPOLOGY=single|cluster] scripts/chaos.sh [more simp-chaos flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.build/debug
for tool in simp-chaos simp-server simp; do
  [ -x "$bin/$tool" ] || { echo "scripts/chaos.sh: $bin/$tool is missing; build first (swift build --build-tests)" >&2; exit 2; }
done
command -v redis-server >/dev/null || { echo "scripts/chaos.sh: redis-server is missing (scripts/install-deps.sh)" >&2; exit 2; }
seed=${SIMP_CHAOS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
# 45 s of faults, then up to 60 s for the messages to settle (they usually do within seconds).
exec "$bin/simp-chaos" --seed "$seed" --duration "${SIMP_CHAOS_DURATION:-45}" \
  --topology "${SIMP_CHAOS_TOPOLOGY:-single}" --bin-dir "$bin" "$@"
