#!/usr/bin/env bash
# Builds what the benchmark scripts run and prints the directory that holds it: simp-bench (the
# Benchmarks package: load generators, Mosquitto/RabbitMQ/NATS clients) and simp-server beside
# it, where `simp-bench --spawn` looks. Installs what building and comparing need when missing:
# mosquitto and librabbitmq-dev (the AMQP client), plus any packages named as arguments.
# The root package needs neither; scripts/run.sh does not install them.
# SIMP_BUILD_CONFIG=debug builds debug instead. Usage: bin=$(scripts/build-bench.sh [PACKAGE...])
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh mosquitto librabbitmq-dev "$@" >&2
config=${SIMP_BUILD_CONFIG:-release}
# The Benchmarks package is built in the root's scratch path (.build): the modules the two
# share are compiled once, and the binaries land in .build/$config as they always did.
# Without the package benchmarks (ordo-one/benchmark, `cd Benchmarks && swift package benchmark`).
export SIMP_BENCH_LOADS_ONLY=1
# Two packages in one scratch path: SwiftPM reuses the last build plan it wrote there when it
# judges nothing changed, and it does not notice that the plan was the other package's. So this
# build plans afresh, and the plan it leaves is removed, for the root's next build to make its own.
trap 'scripts/forget-build-plan.sh "$config"' EXIT
bench=(swift build -c "$config" --package-path Benchmarks --scratch-path "$PWD/.build" --disable-build-manifest-caching)
"${bench[@]}" --product simp-server >&2
"${bench[@]}" --product simp-bench >&2
"${bench[@]}" --show-bin-path
