#!/usr/bin/env bash
# Proof that simp-chaos's checker catches a broken server: builds this commit with a patch from
# scripts/chaos-broken/ (default: the server says `accepted` before the store) in a separate
# worktree, runs the CI chaos plan against it, and exits 0 only if the checker found violations.
# About 6 minutes for the build (a fresh .build), then the run. Not part of .ci/run.
# Usage: scripts/chaos-broken.sh [PATCH] [more simp-chaos flags]
set -euo pipefail
cd "$(dirname "$0")/.."
patch=${1:-scripts/chaos-broken/accepted-before-store.patch}
shift || true
tree=${SIMP_BROKEN_TREE:-/tmp/simp-broken-tree}
rm -rf "$tree"
git worktree prune
git worktree add --detach "$tree" HEAD >/dev/null
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
git -C "$tree" apply "$PWD/$patch" || { echo "chaos-broken: $patch no longer applies to this commit; update it" >&2; exit 2; }
echo "chaos-broken: building with $patch (swift build in $tree)"
swift build --package-path "$tree" --product simp-server >/dev/null
swift build --package-path "$tree" --product simp >/dev/null
swift build --package-path "$tree" --product simp-chaos >/dev/null
bin="$tree/.build/debug"
set +e
"$bin/simp-chaos" --seed "${SIMP_CHAOS_SEED:-2929851673}" --duration "${SIMP_CHAOS_DURATION:-45}" --bin-dir "$bin" "$@"
status=$?
set -e
if [ "$status" -eq 1 ]; then
  echo "chaos-broken: the checker caught the broken build (exit 1), as it must"
  exit 0
fi
echo "chaos-broken: simp-chaos exited $status against a broken build; the checker missed it" >&2
exit 1
