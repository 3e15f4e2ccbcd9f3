#!/usr/bin/env bash
# What many idle, logged-in sessions cost one simp-server: RSS per session and CPU at rest.
# Every session holds one of the server's descriptors (20,000 per process on this machine), so
# the default stays just under that; the clients are spread over several simp-bench processes,
# since each client holds two descriptors of its own.
# The CPU is measured over a whole heartbeat (60 s), the longest period of an idle session.
# Usage: [SERVER_ARGS="--heartbeat 30"] [MEASURE_SECONDS=60] [SERVER_BIN=path/to/simp-server] scripts/bench-idle.sh [SESSIONS] [PER_BENCH_PROCESS]
# SERVER_BIN runs another build of the server (an A/B comparison in one sitting).
set -euo pipefail
cd "$(dirname "$0")/.."
total=${1:-19500}
per=${2:-6500}
bin=$(scripts/build-bench.sh python3)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
redis_port=$(free_port); tcp_port=$(free_port); metrics_port=$(free_port)
work=$(mktemp -d)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
redis=$!
"${SERVER_BIN:-$bin/simp-server}" --redis "redis://127.0.0.1:$redis_port" --port "$tcp_port" --udp-port 0 --metrics-port "$metrics_port" \
  --max-conns-per-ip 100000 --max-registrations-per-ip 1000000 --max-hashing-queue 1024 --max-hashing-per-ip 1024 \
  --scrypt-rounds 1024 --log-level warning ${SERVER_ARGS:-} >"$work/server.log" 2>&1 &
server=$!
trap 'kill $server $redis 2>/dev/null; kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
sleep 2
rss() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sessions() {
  exec 3<>"/dev/tcp/127.0.0.1/$metrics_port" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && awk '$1 == "simp_sessions" {print int($2)}' <&3
  exec 3<&-
}
before=$(rss $server)
benches=$(( (total + per - 1) / per ))
bench_pids=()
for i in $(seq 0 $((benches - 1))); do
  n=$(( i == benches - 1 ? total - i * per : per ))
  "$bin/simp-bench" --server "127.0.0.1:$tcp_port" --idle "$n" --idle-from $((i * per)) --duration 600 >"$work/bench$i.log" 2>&1 &
  bench_pids+=($!)
done
for _ in $(seq 1 600); do
  [ "$(sessions)" = "$total" ] && break
  for i in "${!bench_pids[@]}"; do
    if ! kill -0 "${bench_pids[$i]}" 2>/dev/null; then
      echo "simp-bench $i ended before its sessions were up:" >&2
      cat "$work/bench$i.log" >&2
      exit 1
    fi
  done
  sleep 1
done
echo "sessions: $(sessions) of $total" >&2
[ "$(sessions)" = "$total" ] || { echo "only $(sessions) of $total sessions came up" >&2; exit 1; }
sleep 5
ticks=$(getconf CLK_TCK)
measure=${MEASURE_SECONDS:-60}
c0=$(cpu $server); sleep "$measure"; c1=$(cpu $server)
after=$(rss $server)
echo "$total idle sessions on one simp-server"
echo "server RSS: $((before / 1024)) MiB before, $((after / 1024)) MiB with the sessions: $(( (after - before) * 1024 / total )) bytes per session"
echo "server CPU at rest: $(awk -v d=$((c1 - c0)) -v t=$ticks -v m="$measure" 'BEGIN {printf "%.2f", d / t / m * 100}')% of a core"
