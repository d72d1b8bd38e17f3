#!/usr/bin/env bash
# Builds every function with cargo-lambda and deploys infra/template.yaml into the running
# LocalStack (CloudFormation with the SAM transform). Deploying twice is harmless: the second run
# updates what changed, or reports "no changes".
#
#   bash localstack/emulator.sh start      # LocalStack with Lambda, CloudFormation, API Gateway…
#   bash infra/deploy-local.sh             # build (x86_64), package, deploy, wait, print the URL
#
# Settings (environment):
#   AWS_ENDPOINT_URL / LOCALSTACK_PORT   LocalStack (default http://127.0.0.1:4566)
#   CARGO_TARGET_DIR                     where cargo builds (the bootstraps land in …/lambda/)
#   AGENTPLANE_DEPLOY_STACK              stack name (default agentplane-local)
#   AGENTPLANE_DEPLOY_SKIP_BUILD=1       deploy the bootstraps already built
#   AGENTPLANE_DEPLOY_MODEL_BASE_URL     the model the turn functions call (default
#                                        http://127.0.0.1:47811/v1: the smoke suite's scripted model)
#   AGENTPLANE_DEPLOY_STREAM_MAX_S       length of one buffered event stream (default 3)
#   AGENTPLANE_DEPLOY_WEBHOOK_RECEIVER   the one loopback webhook receiver the functions may reach
#                                        (default 127.0.0.1:47812: tests/deployed.rs listens there)
#   AGENTPLANE_DEPLOY_TEMPLATE           the template to deploy (default infra/template.yaml; the
#                                        upgrade check deploys infra/releases/<previous>/template.yaml
#                                        first); parameters it does not declare are not passed
#   AGENTPLANE_DEPLOY_FRESH=1            delete the stack first if it exists (a create, never an update)
#   AGENTPLANE_DEPLOY_RECREATE=0         an update LocalStack cannot apply fails instead of
#                                        deleting and creating the stack again (default 1)
# It writes .localstack/deployed.json (the API's URL, the functions, bootstrap sizes; no secret)
# for tests/deployed.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
say() { printf '[deploy] %s\n' "$*" >&2; }

endpoint="${AWS_ENDPOINT_URL:-http://127.0.0.1:${LOCALSTACK_PORT:-4566}}"
stack="${AGENTPLANE_DEPLOY_STACK:-agentplane-local}"
target="${CARGO_TARGET_DIR:-$root/target}"
state="$root/.localstack"
tools="$state/tools"

# cargo-lambda (from PyPI, with Zig) and boto3, in the tools venv tests/run.sh also uses.
if [ ! -x "$tools/bin/cargo-lambda" ] || ! "$tools/bin/python" -c 'import boto3' 2>/dev/null; then
  say "installing cargo-lambda and boto3 into $tools"
  [ -x "$tools/bin/python" ] || python3 -m venv "$tools"
  "$tools/bin/pip" install -q --disable-pip-version-check 'cargo-lambda==1.*' 'boto3==1.*'
fi
export PATH="$tools/bin:$PATH"

health=$(curl -fsS --max-time 5 "$endpoint/_localstack/health" 2>/dev/null || true)
for service in cloudformation lambda apigateway secretsmanager; do
  if ! grep -q "\"$service\": *\"\(available\|running\)\"" <<<"$health"; then
    say "LocalStack at $endpoint does not serve $service."
    say "Start it with: bash localstack/emulator.sh stop; bash localstack/emulator.sh start"
    exit 1
  fi
done

if [ "${AGENTPLANE_DEPLOY_SKIP_BUILD:-0}" != 1 ]; then
  say "cargo lambda build --release (x86_64): one binary per function"
  started=$(date +%s)
  # `nice`: the build is long and must not starve whatever else runs on the machine.
  CARGO_TARGET_DIR="$target" nice -n 10 cargo lambda build --release --x86-64 \
    -p agentplane-functions -o zip
  say "built in $(( $(date +%s) - started )) s"
fi

model_url="${AGENTPLANE_DEPLOY_MODEL_BASE_URL:-http://127.0.0.1:47811/v1}"
params=(
  --param "Architecture=x86_64"
  --param "StreamingResponses=false"
  --param "StreamMaxSeconds=${AGENTPLANE_DEPLOY_STREAM_MAX_S:-3}"
  --param "ModelBaseUrl=$model_url"
  --param "WebhooksAllowedPrivate=${AGENTPLANE_DEPLOY_WEBHOOK_RECEIVER:-127.0.0.1:47812}"
  # What LocalStack's free edition cannot create, or need not: no sandbox nodes (no EC2 Auto
  # Scaling), no dashboard (no CloudFormation resource for it), no account-level API Gateway
  # logging role, and no reserved concurrency (the host executor runs one invocation per
  # function at a time anyway). Log groups, alarms and the alarm topic are created.
  --param "CloudWatchDashboard=false"
  --param "ConfigureApiGatewayAccount=false"
  --param "StreamReservedConcurrency=0"
  --param "TurnReservedConcurrency=0"
)
# Host-process functions reach LocalStack on loopback; in LocalStack's Docker executor the
# containers get LocalStack's own address, so no override then.
if ! { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }; then
  params+=(--param "AwsEndpointUrl=$endpoint")
fi


started=$(date +%s)
api_url=$("$tools/bin/python" infra/deploy_local.py --endpoint "$endpoint" --stack "$stack" \
  --template "${AGENTPLANE_DEPLOY_TEMPLATE:-infra/template.yaml}" --lambda-dir "$target/lambda" --bucket "$stack-artifacts" \
  --out "$state/deployed.json" --report "$state/lambda-report.jsonl" "${params[@]}")
say "deployed in $(( $(date +%s) - started )) s"
secret=$("$tools/bin/python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["core_key_secret_arn"])' "$state/deployed.json")
cat <<TXT

REST API:  $api_url
Core key:  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \\
             aws --endpoint-url $endpoint secretsmanager get-secret-value \\
             --secret-id '$secret' --query SecretString --output text
Try:       curl -s -X POST $api_url/core/v1/projects -H "Authorization: Bearer \$CORE_KEY" \\
             -H 'content-type: application/json' -d '{"name":"demo"}'
TXT
