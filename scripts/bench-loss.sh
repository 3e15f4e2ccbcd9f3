#!/usr/bin/env bash
# simp-bench under packet loss: runs it (with --spawn: its own Redis and simp-server) inside a
# fresh network namespace whose loopback drops a share of the UDP datagrams, both ways, with
# iptables. TCP (the control channel, and Redis) stays clean. Needs root, iproute2, iptables.
# Usage: scripts/bench-loss.sh [LOSS] [simp-bench options], e.g. scripts/bench-loss.sh 0.1 --pairs 8 --window 4
set -euo pipefail
cd "$(dirname "$0")/.."
loss=${1:-0.1}; shift || true
bin=$(scripts/build-bench.sh)
ns="simp-bench-loss-$$"
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
ip netns exec "$ns" iptables -A INPUT -p udp -m statistic --mode random --probability "$loss" -j DROP
echo "dropping $loss of UDP datagrams in namespace $ns" >&2
ip netns exec "$ns" "$bin/simp-bench" --spawn "$@"
