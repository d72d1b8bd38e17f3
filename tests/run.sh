#!/usr/bin/env bash
# The full test suite, on a fresh machine: installs what the tests need (system packages, pip
# tools, LocalStack), starts LocalStack, then checks formatting, lints (clippy, cfn-lint) and runs
# every test, then deploys the stack into LocalStack (infra/deploy-local.sh: one cargo-lambda
# build of every function) and runs the smoke suite through its REST API (tests/deployed.rs).
# Usage: bash tests/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '\n[tests] %s\n' "$*" >&2; }

# System packages: bubblewrap (sandboxes), a JDK (DynamoDB Local), curl.
bash localstack/prereqs.sh bwrap javac curl

# pip tools, in a git-ignored venv of their own.
# cfn-lint checks the template; schemathesis drives each surface's OpenAPI document
# (tests/contract.rs); standardwebhooks (the reference library) verifies real webhook deliveries
# (tests/webhooks.rs); cargo-lambda (with Zig) builds the functions and boto3 deploys them
# (infra/deploy-local.sh).
tools="$root/.localstack/tools"
if [ ! -x "$tools/bin/cfn-lint" ] || [ ! -x "$tools/bin/schemathesis" ] || [ ! -x "$tools/bin/cargo-lambda" ] \
  || ! "$tools/bin/python" -c 'import standardwebhooks, boto3' 2>/dev/null; then
  say "installing cfn-lint, schemathesis, standardwebhooks, cargo-lambda and boto3"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check 'cfn-lint==1.*' 'schemathesis==4.32.*' \
    'standardwebhooks==1.*' 'cargo-lambda==1.*' 'boto3==1.*'
fi
export AGENTPLANE_CFN_LINT="$tools/bin/cfn-lint"
export AGENTPLANE_SCHEMATHESIS="$tools/bin/schemathesis"
export AGENTPLANE_TOOLS_PYTHON="$tools/bin/python"

say "starting LocalStack"
bash localstack/emulator.sh start

say "cargo fmt --check"
cargo fmt --all -- --check

say "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

say "cfn-lint infra/template.yaml"
"$tools/bin/cfn-lint" infra/template.yaml

say "cargo test"
# Every test binary runs even after one fails, so a red run shows every failure at once.
failed=0
cargo test --workspace --no-fail-fast || failed=1

say "deploy the stack into LocalStack (infra/deploy-local.sh)"
bash infra/deploy-local.sh
say "smoke suite through the deployed REST API (tests/deployed.rs)"
AGENTPLANE_DEPLOYED="$root/.localstack/deployed.json" \
  cargo test -p agentplane-tests --test deployed -- --nocapture
exit "$failed"
