#!/usr/bin/env bash
# Installs the Debian packages SIMP needs, only those missing, plus any named as arguments
# (the tests and the benchmark add mosquitto). Needs root (or sudo).
set -euo pipefail
need=()
for pkg in redis-server libhiredis-dev librabbitmq-dev libssl-dev libsqlite3-dev libedit-dev pkg-config iproute2 iptables openssl "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >&2
