#!/usr/bin/env bash
# Installs the durable brokers simp-bench compares SIMP with (RabbitMQ and NATS with JetStream),
# only those missing. Only the benchmark needs them: CI does not run this, and the tests that use
# them are skipped without them. Needs root (or sudo).
set -euo pipefail
need=()
for pkg in rabbitmq-server nats-server "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >&2
# The bench starts private brokers on free ports; a system-wide one the package just started
# would only add noise to the measurements.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  for service in rabbitmq-server nats-server; do
    for pkg in "${need[@]}"; do
      if [ "$pkg" = "$service" ] && systemctl is-active --quiet "$service"; then
        echo "stopping and disabling the system $service service (the bench runs its own)" >&2
        $sudo systemctl disable --now "$service" >&2
      fi
    done
  done
fi
