#!/usr/bin/env bash
# Installs the durable brokers simp-bench compares SIMP with (RabbitMQ and NATS with JetStream),
# only those missing, through install-deps.sh. The benchmark and its durable-load tests need
# them; scripts/test.sh (so CI) runs this. Needs root (or sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh rabbitmq-server nats-server "$@"
# The bench starts private brokers on free ports; a system-wide one the packages started
# would only add noise to the measurements.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  for service in rabbitmq-server nats-server; do
    if systemctl is-active --quiet "$service"; then
      echo "stopping and disabling the system $service service (the bench runs its own)" >&2
      $sudo systemctl disable --now "$service" >&2
    fi
  done
fi
