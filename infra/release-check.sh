#!/usr/bin/env bash
# The release step (README: Upgrading): the whole upgrade path on LocalStack, with the previous
# release's own build, before a release ships. Not part of every CI run (it builds two releases).
#
#   bash localstack/emulator.sh start
#   bash infra/release-check.sh
#
# 1. the previous release (infra/releases/PREVIOUS; its code from the tag v<version>, or
#    AGENTPLANE_PREVIOUS_REF) is built in a git worktree and deployed as a fresh stack;
# 2. the upgrade suite's `before` phase writes through every surface (sessions with events, an
#    agent version, a paused action, a webhook endpoint, a Platform Run; with a node when
#    AGENTPLANE_DEPLOY_NODE names the daemon binary);
# 3. this release is built and deployed as an update of the same stack (never recreated);
# 4. the `after` phase checks the change set (no stateful resource replaced or removed, every
#    physical id kept) and reads everything back; then the smoke suite runs on a fresh stack.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '[release-check] %s\n' "$*" >&2; }

previous=$(cat infra/releases/PREVIOUS)
ref="${AGENTPLANE_PREVIOUS_REF:-v$previous}"
git rev-parse --verify -q "$ref^{commit}" >/dev/null || { say "no git ref $ref (set AGENTPLANE_PREVIOUS_REF)"; exit 1; }
state="$root/.localstack"
tools="$state/tools"
target="${CARGO_TARGET_DIR:-$root/target}"
previous_target="$root/target-release-$previous"
worktree="$state/release-$previous"
export AGENTPLANE_DEPLOY_STACK="${AGENTPLANE_DEPLOY_STACK:-agentplane-release}" AGENTPLANE_DEPLOY_RECREATE=0
export CARGO_INCREMENTAL=0

say "the suite binary (this release's tests)"
suite=$(cargo test -p agentplane-tests --test suite --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "suite":
        print(m["executable"])')
mkdir -p "$state/bin"
cp "$suite" "$state/bin/suite-release"
run_suite() { AGENTPLANE_DEPLOYED="$state/deployed.json" "$state/bin/suite-release" "$@" --nocapture; }

say "building release $previous ($ref) in $worktree"
rm -rf "$worktree"
git worktree prune
git worktree add --detach "$worktree" "$ref" >/dev/null
if [ ! -x "$tools/bin/cargo-lambda" ] || ! "$tools/bin/python" -c 'import boto3' 2>/dev/null; then
  [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check 'cargo-lambda==1.*' 'boto3==1.*'
fi
export PATH="$tools/bin:$PATH"
(cd "$worktree" && CARGO_TARGET_DIR="$previous_target" cargo lambda build --release --x86-64 \
  -p agentplane-functions -o zip)

say "deploying release $previous as a fresh stack"
CARGO_TARGET_DIR="$previous_target" AGENTPLANE_DEPLOY_SKIP_BUILD=1 AGENTPLANE_DEPLOY_FRESH=1 \
  AGENTPLANE_DEPLOY_TEMPLATE="$worktree/infra/template.yaml" bash infra/deploy-local.sh
cp "$state/deployed.json" "$state/deployed-before.json"
AGENTPLANE_UPGRADE_PHASE=before run_suite deployed::upgrade::before

say "building this release and updating the stack"
CARGO_TARGET_DIR="$target" bash infra/deploy-local.sh
AGENTPLANE_UPGRADE_PHASE=after AGENTPLANE_UPGRADE_BEFORE="$state/deployed-before.json" \
  run_suite deployed::upgrade::after
# The smoke suite on a fresh stack of this release: LocalStack's REST API update adds no route a
# release adds (AWS's does), so the upgraded stack serves only the routes both releases have.
AGENTPLANE_DEPLOY_STACK=agentplane-release-smoke AGENTPLANE_DEPLOY_FRESH=1 AGENTPLANE_DEPLOY_SKIP_BUILD=1 \
  CARGO_TARGET_DIR="$target" bash infra/deploy-local.sh
run_suite deployed::
git worktree remove --force "$worktree"
say "release check passed: $previous → $(grep -m1 '^version' Cargo.toml | cut -d'"' -f2)"
