#!/usr/bin/env bash
# Runs simp-bench against its own Redis and simp-server (release build), side by side with a
# private Mosquitto on a free port. Installs redis-server and mosquitto when missing. Extra arguments go to simp-bench, e.g.
#   scripts/bench.sh --pairs 8 --window 32 --duration 10 --json
#   scripts/bench.sh --pairs 8 --window 1 --api async --compare rabbitmq,jetstream
# (--compare rabbitmq or jetstream installs rabbitmq-server and nats-server when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh mosquitto
case " $* " in *rabbitmq*|*jetstream*) scripts/install-brokers.sh ;; esac
swift build -c release --product simp-server >&2
swift build -c release --product simp-bench >&2
exec "$(swift build -c release --show-bin-path)/simp-bench" --spawn --compare-mosquitto "$@"
