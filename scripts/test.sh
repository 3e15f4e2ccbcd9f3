#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds once, runs every test.
# Tests start their own redis-server on free ports; nothing else needs to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build --build-tests
swift test --skip-build "$@"
