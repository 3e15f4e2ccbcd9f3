#!/usr/bin/env bash
# Measures, on a private redis-server (AOF everysec), what one group message costs Redis in
# the two layouts docs/ARCHITECTURE.md weighs: a store into each member's inbox (the
# commands the store script runs for one message, one call per member) against one append
# to a group log (members read it with cursors of their own). Prints microseconds per call
# inside Redis (INFO commandstats) and per 100-member group message.
set -euo pipefail
cd "$(dirname "$0")"
port=${PORT:-6555}
dir=$(mktemp -d)
redis-server --port "$port" --save '' --appendonly yes --appendfsync everysec --dir "$dir" --daemonize yes >/dev/null
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
body=$(head -c 250 /dev/zero | tr '\0' 'x')
member=$(redis-cli -p "$port" script load "$(cat group-layout/member.lua)")
group=$(redis-cli -p "$port" script load "$(cat group-layout/group.lua)")
per_call() {
  redis-cli -p "$port" info commandstats | sed -n 's/.*cmdstat_evalsha:calls=\([0-9]*\),usec=\([0-9]*\),usec_per_call=\([0-9.]*\).*/\3/p' | tr -d '\r'
}
redis-cli -p "$port" config resetstat >/dev/null
redis-benchmark -p "$port" -n 200000 -P 16 -c 4 -r 100 -q evalsha "$member" 8 "m:{u__rand_int__}:user" \
  "m:{u__rand_int__}:seq" "m:{u__rand_int__}:inbox" "m:{u__rand_int__}:acked" "m:{u__rand_int__}:num" \
  "m:{u__rand_int__}:presence" "m:{u__rand_int__}:mids:alice" "m:{u__rand_int__}:hist:grp" "id__rand_int__" "$body" >/dev/null 2>&1
m=$(per_call)
redis-cli -p "$port" config resetstat >/dev/null
redis-benchmark -p "$port" -n 200000 -P 16 -c 4 -r 1000000 -q evalsha "$group" 5 "g:{grp}:user" "g:{grp}:seq" \
  "g:{grp}:log" "g:{grp}:mids" "g:{grp}:nodes" "id__rand_int__" "$body" >/dev/null 2>&1
g=$(per_call)
echo "member inbox store: $m us per call; 100 members: $(echo "$m * 100" | bc) us per group message"
echo "group log append:   $g us per call (per group message, whatever the members)"
