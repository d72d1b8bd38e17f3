#!/usr/bin/env bash
# The benchmark: starts LocalStack, builds in release mode and prints latency numbers.
# BENCH_N sets the number of measured calls per operation (default 300).
# `bash tests/bench.sh telemetry` runs the telemetry bench instead (24 h history read over 2880
# samples, one sampler pass over 1,000 allocations; BENCH_N history reads, default 30).
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/emulator.sh start
if [ "${1:-}" = "telemetry" ]; then
  cargo run --release -q -p agentplane-tests --bin bench-telemetry
else
  cargo run --release -q -p agentplane-tests --bin bench
fi
