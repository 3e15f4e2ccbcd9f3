#!/usr/bin/env bash
# Runs simp-bench against its own Redis and simp-server (release build), side by side with a
# private Mosquitto on a free port. Installs what the bench needs when missing (redis-server,
# mosquitto, librabbitmq-dev) and builds simp-bench in the Benchmarks package
# (scripts/build-bench.sh; binaries in .build/release). Extra arguments go to simp-bench, e.g.
#   scripts/bench.sh --pairs 8 --window 32 --duration 10 --json
#   scripts/bench.sh --pairs 8 --window 1 --api async --compare rabbitmq,jetstream
# (--compare rabbitmq or jetstream installs rabbitmq-server and nats-server when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
case " $* " in *rabbitmq*|*jetstream*) scripts/install-brokers.sh ;; esac
bin=$(scripts/build-bench.sh)
exec "$bin/simp-bench" --spawn --compare-mosquitto "$@"
