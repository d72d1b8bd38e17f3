#!/usr/bin/env bash
# The full test suite, on a fresh machine: installs what the tests need (system packages, pip
# tools, LocalStack), starts LocalStack, then checks formatting, lints (clippy, cfn-lint) and runs
# every test (one binary, tests/suite.rs). Then it deploys the stack into LocalStack
# (infra/deploy-local.sh: one cargo-lambda release build of the one Lambda binary)
# and runs the smoke suite through its REST API (tests/deployed.rs); AGENTPLANE_DEPLOY_SMOKE=0
# skips that part.
# Usage: bash tests/run.sh   (or AGENTPLANE_DEPLOY_SMOKE=0 bash tests/run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '\n[tests] %s\n' "$*" >&2; }
disk() { say "disk: $(df -h --output=avail,size . | tail -1 | awk '{print $1 " free of " $2}')"; }
# A clean build gains nothing from incremental state, and it would take gigabytes of disk.
export CARGO_INCREMENTAL=0
disk

# System packages: bubblewrap (sandboxes), a JDK (DynamoDB Local), curl, e2fsprogs and mount
# (each sandbox's disk image).
bash localstack/prereqs.sh bwrap javac curl mkfs.ext4 mount

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

disk

if [ "${AGENTPLANE_DEPLOY_SMOKE:-1}" = "1" ]; then
  # The smoke suite is a module of the test binary just built: keep that binary, then give the
  # debug build's disk back before the release build of every function.
  suite=$(cargo test -p agentplane-tests --test suite --no-run --message-format=json 2>/dev/null \
    | "$tools/bin/python" -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "suite":
        print(m["executable"])')
  mkdir -p "$root/.localstack/bin"
  cp "$suite" "$root/.localstack/bin/suite"
  rm -rf "${CARGO_TARGET_DIR:-$root/target}/debug"
  disk
  say "deploy the stack into LocalStack (infra/deploy-local.sh)"
  if bash infra/deploy-local.sh; then
    disk
    say "smoke suite through the deployed REST API (tests/deployed.rs)"
    AGENTPLANE_DEPLOYED="$root/.localstack/deployed.json" \
      "$root/.localstack/bin/suite" deployed:: --nocapture || failed=1
  else
    failed=1
  fi
fi
exit "$failed"
