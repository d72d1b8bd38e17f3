#!/usr/bin/env bash
# The benchmark: starts LocalStack, builds in release mode and prints latency numbers.
# BENCH_N sets the number of measured calls per operation (default 300; the sandbox bench 100).
# No argument runs every suite (runs included); an argument runs one: sessions, turns,
# streaming (time to the first text delta of a streamed turn after the model's first piece),
# background, files (a 20 MiB upload and download),
# sweep (the retention sweep over 10,000 expired files), webhooks (delivery latency from a state change to a local receiver, deliveries per second at 10
# endpoints), sandboxes or telemetry (24 h history read over
# 2880 samples, one sampler pass over 1,000 allocations; BENCH_N history reads, default 30), or
# runs (Platform Runs: checkpoint and restore time against workspace size, bytes uploaded per
# checkpoint, rollback latency DELETE → reverted; BENCH_RUNS_SIZES narrows the sizes).
set -euo pipefail
cd "$(dirname "$0")/.."
bash localstack/emulator.sh start
case "${1:-}" in
  sandboxes) cargo run --release -q -p agentplane-bench --bin bench-sandboxes ;;
  telemetry) cargo run --release -q -p agentplane-bench --bin bench-telemetry ;;
  runs) cargo run --release -q -p agentplane-bench --bin bench-runs ;;
  "")
    cargo run --release -q -p agentplane-bench --bin bench
    cargo run --release -q -p agentplane-bench --bin bench-sandboxes
    cargo run --release -q -p agentplane-bench --bin bench-telemetry
    cargo run --release -q -p agentplane-bench --bin bench-runs
    ;;
  *) cargo run --release -q -p agentplane-bench --bin bench -- "$@" ;;
esac
