#!/usr/bin/env bash
# Starts the whole system locally: LocalStack (installed on first use), then the local gateway,
# which provisions missing resources and serves every route on one port (AGENTPLANE_LISTEN,
# default 127.0.0.1:8080). Ctrl-C stops the gateway; `bash localstack/emulator.sh stop` stops
# LocalStack.
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/emulator.sh start
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}"
exec cargo run -p agentplane-local
