#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds once, runs every test, then a short
# libFuzzer pass over each fuzz target (skipped when arguments filter the tests).
# Tests start their own redis-server on free ports; nothing else needs to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
# systemd: its systemd-analyze checks deploy/simp-server.service (the service is not started).
scripts/install-deps.sh mosquitto systemd tmux libedit-dev
swift build --build-tests
# Serial: several tests wait on child processes and sockets with blocking calls, and on a
# 2-core machine parallel suites would starve the cooperative thread pool they share.
swift test --skip-build --no-parallel "$@"
if [ $# -eq 0 ]; then
  scripts/fuzz.sh "${SIMP_FUZZ_SECONDS:-20}"
fi
