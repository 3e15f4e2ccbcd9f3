#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds once, runs every test of the root
# package and of the Benchmarks package (SIMPBenchTests, MQTTLoadTests: the load generators
# and broker clients, against real brokers), then a short libFuzzer pass over each fuzz target
# and a short simp-chaos run (both skipped when arguments filter the tests). Filters apply to
# both packages.
# `scripts/test.sh --tsan [filters]`: the root package's tests under ThreadSanitizer, built in
# .build-tsan, no fuzz pass.
# Tests start their own redis-server on free ports; nothing else needs to be running.
set -euo pipefail
cd "$(dirname "$0")/.."
tsan=false
if [ "${1:-}" = "--tsan" ]; then
  tsan=true
  shift
fi
# systemd: its systemd-analyze checks deploy/simp-server.service (the service is not started).
# mosquitto and librabbitmq-dev: the Benchmarks package's tests (the root needs neither).
scripts/install-deps.sh mosquitto librabbitmq-dev systemd tmux libedit-dev
# RabbitMQ and NATS: the durable-load tests run a short load through each (about 35 s with the install).
scripts/install-brokers.sh
if $tsan; then
  # A scratch path of its own: sanitizer flags in .build would rebuild everything there, and
  # again for the next normal build.
  swift build --build-tests --sanitize=thread --scratch-path .build-tsan
  # A race report fails the run (TSan's exit code 66) but does not stop it, so one run lists them all.
  export TSAN_OPTIONS="suppressions=$PWD/scripts/tsan-suppressions.txt ${TSAN_OPTIONS:-}"
  exec swift test --skip-build --sanitize=thread --scratch-path .build-tsan --no-parallel "$@"
fi
# A build plan the Benchmarks package left in .build (an interrupted run) is not reused.
scripts/forget-build-plan.sh debug
swift build --build-tests
# Serial: several tests wait on child processes and sockets with blocking calls, and on a
# 2-core machine parallel suites would starve the cooperative thread pool they share.
# Both packages run even when the first fails, so one run lists every failure.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=0
swift test --skip-build --no-parallel "$@" 2>&1 | tee "$log" || failed=1
# Then the Benchmarks package (SIMPBenchTests, MQTTLoadTests, and simp-bench, which
# BenchProcessTests runs) in the root's scratch path: the modules the two share (SIMPClient,
# SwiftNIO, ...) are compiled once, and simp-bench sits beside the root's simp-server. Without
# its package benchmarks (SIMP_BENCH_LOADS_ONLY=1: ordo-one/benchmark and its plugin are not
# built). It plans afresh, and its plan is removed at the end, so neither package runs the
# other's cached plan (scripts/forget-build-plan.sh).
export SIMP_BENCH_LOADS_ONLY=1
bench=(--package-path Benchmarks --scratch-path "$PWD/.build" --disable-build-manifest-caching)
trap 'rm -f "$log"; scripts/forget-build-plan.sh debug' EXIT
swift build "${bench[@]}" --build-tests
swift test "${bench[@]}" --skip-build --no-parallel "$@" 2>&1 | tee -a "$log" || failed=1
[ "$failed" -eq 0 ] || exit 1
if [ $# -eq 0 ]; then
  # The whole suite runs here: a test skipped (a missing package, no root for a network
  # namespace or a tmpfs) is a failure, not a line to miss. SIMP_ALLOW_SKIPS=1 lets a machine
  # that cannot run them (no root) pass; README.md says which suites need what.
  skipped=$(grep -a '^➜ Test .* skipped' "$log" || true)
  if [ -n "$skipped" ]; then
    echo "test.sh: tests were skipped:" >&2
    echo "$skipped" >&2
    if [ "${SIMP_ALLOW_SKIPS:-}" != 1 ]; then exit 1; fi
  fi
  scripts/fuzz.sh "${SIMP_FUZZ_SECONDS:-20}"
  # A short chaos run (about a minute) with a fixed seed, so CI repeats one known plan;
  # SIMP_CHAOS_SEED picks another.
  SIMP_CHAOS_SEED="${SIMP_CHAOS_SEED:-2929851673}" scripts/chaos.sh
fi
