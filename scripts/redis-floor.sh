#!/usr/bin/env bash
# What Redis itself spends per request on this machine, the floor under SIMP's "Redis CPU per
# message" (docs/PERFORMANCE.md, "Floors"). Starts a private redis-server configured as
# simp-bench's (AOF everysec, TCP on loopback), sends each request N times from C clients with
# redis-benchmark, one request per round trip, and prints Redis' CPU per request (from
# /proc/PID/stat, so its event loop, the AOF write and its wake-ups count, as they do in a
# real run), and what the least durable store and receipt of one message would cost. Usage:
# scripts/redis-floor.sh [N] (default 40000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh redis-server >&2
requests="${1:-40000}"
dir="$(mktemp -d)"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

for _ in 1 2 3 4 5 6 7 8 9 10; do
  port=$(( 20000 + RANDOM % 40000 ))
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly yes --appendfsync everysec \
    --dir "$dir" --daemonize no --loglevel warning --logfile "$dir/redis.log" &
  pid=$!
  for _ in $(seq 50); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
done
if [ -z "$pid" ]; then
  echo "redis-floor: redis-server did not start: $(tail -3 "$dir/redis.log" 2>/dev/null)" >&2
  exit 1
fi

ticks=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
load() { redis-cli -p "$port" script load "$1"; }
noop=$(load "return 1")
gets=$(load "$(for _ in $(seq 16); do echo "redis.call('GET', KEYS[1])"; done; echo 'return 1')")
sets=$(load "$(for i in $(seq 8); do echo "redis.call('SET', KEYS[1] .. ':$i', ARGV[1])"; done; echo 'return 1')")
# The least a durable one-message store can do: read the marks and the id, then write the seq,
# the inbox entry, one history entry and the id. And the least its receipt can do: write the
# confirmed mark and take the entry out of the inbox.
store=$(load "local m = redis.call('MGET', KEYS[1], KEYS[2])
if redis.call('ZSCORE', KEYS[4], ARGV[1]) then return 0 end
local top = tonumber(m[2] or '0') + 1
redis.call('SET', KEYS[2], top)
redis.call('ZADD', KEYS[3], top, ARGV[2])
redis.call('RPUSH', KEYS[5], ARGV[2])
redis.call('ZADD', KEYS[4], top, ARGV[1])
return top")
receipt=$(load "redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[1])
return 1")
marks=("u:{a}:acked" "u:{a}:seq" "u:{a}:inbox" "u:{a}:ids" "u:{a}:hist")
payload=$(printf 'x%.0s' $(seq 120))

measure() {
  local clients=$1 label=$2
  shift 2
  local before after
  before=$(cpu)
  redis-benchmark -p "$port" -c "$clients" -n "$requests" -r 1000000 -q "$@" >/dev/null
  after=$(cpu)
  printf '%-36s %3d  %6d\n' "$label" "$clients" $(( (after - before) * 1000000 / ticks / requests ))
}

printf '%-36s %3s  %6s\n' "request (one per round trip)" "C" "us/req"
for clients in 1 8; do
  measure "$clients" "GET" GET key:__rand_int__
  measure "$clients" "SET (AOF)" SET key:__rand_int__ "$payload"
  measure "$clients" "EVALSHA return 1" EVALSHA "$noop" 1 key:__rand_int__
  measure "$clients" "EVALSHA 16 x GET" EVALSHA "$gets" 1 key:__rand_int__
  measure "$clients" "EVALSHA 8 x SET (AOF)" EVALSHA "$sets" 1 key:__rand_int__ "$payload"
  measure "$clients" "least store: 3 reads, 4 writes" EVALSHA "$store" 5 "${marks[@]}" id:__rand_int__ "$payload"
  measure "$clients" "least receipt: 2 writes" EVALSHA "$receipt" 2 "${marks[0]}" "${marks[2]}" __rand_int__
done
