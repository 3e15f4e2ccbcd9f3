#!/usr/bin/env bash
# Removes the build plan SwiftPM cached in .build (the llbuild manifest and the build
# description), so the next `swift build` there plans its own package graph. The root package
# and the Benchmarks package share .build (scripts/build-bench.sh, scripts/test.sh), and SwiftPM
# would otherwise reuse the other package's plan when it sees no change in the files it tracks.
# Nothing compiled is removed. Usage: scripts/forget-build-plan.sh [debug|release]...
set -euo pipefail
cd "$(dirname "$0")/.."
configs=("$@")
[ $# -gt 0 ] || configs=(debug release)
for config in "${configs[@]}"; do
  rm -f ".build/$config.yaml" .build/*/"$config"/description.json
done
