#!/usr/bin/env bash
# The full test suite, on a fresh machine: installs what the tests need (system packages, pip
# tools, LocalStack), starts LocalStack, then checks formatting, lints (clippy, cfn-lint) and runs
# every test. With AGENTPLANE_DEPLOY_SMOKE=1 it then deploys the stack into LocalStack
# (infra/deploy-local.sh: one cargo-lambda build of every function, 20-45 min on 2 cores) and runs
# the smoke suite through its REST API (tests/deployed.rs).
# Usage: bash tests/run.sh   (or AGENTPLANE_DEPLOY_SMOKE=1 bash tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '\n[tests] %s\n' "$*" >&2; }

# System packages: bubblewrap (sandboxes), a JDK (DynamoDB Local), curl.
bash localstack/prereqs.sh bwrap javac curl

# pip tools, in a git-ignored venv of their own.
# cfn-lint checks the template; schemathesis drives each surface's OpenAPI document
# (tests/contract.rs); standardwebhooks (the reference library) verifies real webhook deliveries
# (tests/webhooks.rs). infra/deploy-local.sh installs its own (cargo-lambda, boto3).
tools="$root/.localstack/tools"
if [ ! -x "$tools/bin/cfn-lint" ] || [ ! -x "$tools/bin/schemathesis" ] \
  || ! "$tools/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  say "installing cfn-lint, schemathesis and standardwebhooks"
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check 'cfn-lint==1.*' 'schemathesis==4.32.*' \
    'standardwebhooks==1.*'
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

if [ "${AGENTPLANE_DEPLOY_SMOKE:-0}" = "1" ]; then
  say "deploy the stack into LocalStack (infra/deploy-local.sh)"
  bash infra/deploy-local.sh
  say "smoke suite through the deployed REST API (tests/deployed.rs)"
  AGENTPLANE_DEPLOYED="$root/.localstack/deployed.json" \
    cargo test -p agentplane-tests --test deployed -- --nocapture || failed=1
fi
exit "$failed"
