#!/usr/bin/env bash
# The benchmark: starts LocalStack, builds in release mode and prints latency numbers.
# BENCH_N sets the number of measured calls per operation (default 300; the sandbox bench 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/emulator.sh start
cargo run --release -q -p agentplane-tests --bin bench -- "$@"
case "${1:-}" in "" | sandboxes) cargo run --release -q -p agentplane-tests --bin bench-sandboxes ;; esac
