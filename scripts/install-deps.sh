#!/usr/bin/env bash
# Installs the Debian packages the root package (server, client, CLI, admin, chaos and
# conformance tools) needs, only those missing, plus any named as arguments: the tests and the
# benchmark (scripts/build-bench.sh) add mosquitto and librabbitmq-dev, which only the Benchmarks
# package uses. Needs root (or sudo).
set -euo pipefail
need=()
for pkg in redis-server libhiredis-dev libssl-dev libsqlite3-dev libedit-dev pkg-config iproute2 iptables openssl "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >&2
