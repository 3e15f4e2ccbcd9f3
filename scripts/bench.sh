#!/usr/bin/env bash
# Runs simp-bench against its own Redis and simp-server (release build), side by side with a
# private Mosquitto. Installs redis-server and mosquitto when missing. Extra arguments go to
# simp-bench, e.g. scripts/bench.sh --pairs 8 --window 32 --duration 10 --json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
if ! command -v mosquitto >/dev/null 2>&1 && [ ! -x /usr/sbin/mosquitto ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing: mosquitto" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mosquitto >&2 || {
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq mosquitto >&2; }
fi
# The distribution's broker service is not needed: the bench starts its own on a free port.
swift build -c release --product simp-server >&2
swift build -c release --product simp-bench >&2
exec "$(swift build -c release --show-bin-path)/simp-bench" --spawn --compare-mosquitto "$@"
