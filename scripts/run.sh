#!/usr/bin/env bash
# The main job: installs what is missing, starts a local Redis (data in ./.data/redis)
# unless SIMP_REDIS_URL is set, builds, and runs simp-server in the foreground.
# Extra arguments go to simp-server, e.g. scripts/run.sh --port 7700 --log-level debug
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
config=${SIMP_BUILD_CONFIG:-release}

if [ -z "${SIMP_REDIS_URL:-}" ]; then
  port=${SIMP_REDIS_PORT:-6379}
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "using the Redis already listening on 127.0.0.1:$port" >&2
  else
    mkdir -p .data/redis
    redis-server --port "$port" --bind 127.0.0.1 --dir "$PWD/.data/redis" \
      --appendonly yes --appendfsync everysec --daemonize yes \
      --pidfile "$PWD/.data/redis/redis.pid" --logfile "$PWD/.data/redis/redis.log"
    for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    echo "started redis-server on 127.0.0.1:$port with data in .data/redis (stop: redis-cli -p $port shutdown)" >&2
  fi
  export SIMP_REDIS_URL="redis://127.0.0.1:$port"
fi

swift build -c "$config" --product simp-server >&2
swift build -c "$config" --product simp >&2
echo "client: $(swift build -c "$config" --show-bin-path)/simp --user NAME" >&2
exec "$(swift build -c "$config" --show-bin-path)/simp-server" "$@"
