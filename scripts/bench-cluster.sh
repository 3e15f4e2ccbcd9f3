#!/usr/bin/env bash
# SIMP with several nodes: msg/s with 1 and 3 simp-servers on one redis-server and on a Redis
# Cluster (3 masters + 3 replicas), and what --redis-min-replicas 1 (Redis WAIT 1) costs. Every
# run starts its own Redis and servers (simp-bench --spawn). Extra arguments go to each run, e.g.
#   scripts/bench-cluster.sh --pairs 8 --window 32 --duration 10
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/build-bench.sh)
for topology in "--nodes 1" "--nodes 3" \
  "--redis-cluster --nodes 1" "--redis-cluster --nodes 3" \
  "--redis-cluster --nodes 1 --redis-min-replicas 1" "--redis-cluster --nodes 3 --redis-min-replicas 1"; do
  # shellcheck disable=SC2086 # the topology is several words on purpose
  "$bin/simp-bench" --spawn $topology "$@"
  echo
done
