#!/usr/bin/env bash
# Starts the whole system locally: LocalStack (installed on first use), then the local gateway,
# which provisions missing resources and serves every route on one port (AGENTPLANE_LISTEN,
# default 127.0.0.1:8080) with its embedded sandbox node. Installs what those need when missing
# (localstack/prereqs.sh); when bubblewrap cannot be installed, it starts without the node and
# says so. Ctrl-C stops the gateway; `bash localstack/emulator.sh stop` stops LocalStack.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf '[up] %s\n' "$*" >&2; }

node=1
[ "${AGENTPLANE_EMBEDDED_NODE:-}" = 0 ] && node=0
needs=(curl)
[ "$node" = 1 ] && needs+=(bwrap mkfs.ext4 mount)
bash localstack/prereqs.sh "${needs[@]}" || true
if [ "$node" = 1 ] && ! command -v bwrap >/dev/null 2>&1; then
  say "bubblewrap is missing and could not be installed: starting WITHOUT the embedded sandbox node."
  say "The sandbox API answers 503 (no sandbox node is online) until you install it"
  say "(apt-get install -y bubblewrap) and run this again."
  export AGENTPLANE_EMBEDDED_NODE=0
fi

bash localstack/emulator.sh start
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://127.0.0.1:4566}"
[ "${AGENTPLANE_EMBEDDED_NODE:-}" = 0 ] || say "the embedded sandbox node starts with the gateway"
exec cargo run -p agentplane-local
