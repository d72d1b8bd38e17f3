"""A LocalStack Lambda runtime executor that runs each function's `bootstrap` as a host process.

LocalStack 4.9 ships only a Docker executor, and its Lambda init downloads a runtime emulator
from the internet. On a machine with neither Docker nor that download, this executor:

- unzips the code as LocalStack does (`prepare_for_execution`) and skips the emulator download;
- serves the Lambda Runtime API (`/2018-06-01/runtime/...`: `invocation/next`, `response`,
  `error`, `init/error`) on a loopback port of its own, one per execution environment;
- starts `bootstrap` with the environment LocalStack computed for the function plus
  `AWS_LAMBDA_RUNTIME_API`, and hands it one invocation at a time;
- turns a streamed response (`Lambda-Runtime-Function-Response-Mode: streaming`, the HTTP
  integration prelude then eight NUL bytes then the body) into the buffered API Gateway proxy
  answer LocalStack's REST API expects, recording when each chunk left the function;
- enforces the function's timeout (the process is killed and started again);
- shortens LocalStack's CloudFormation poll of a resource still being created from 5 s to
  `AGENTPLANE_CFN_POLL_S` (default 0.2 s; a start hook), since it deploys one resource at a time
  and the stack's 86 functions would otherwise wait 5 s each;
- makes a stack update that changes the REST API keep its stage: LocalStack 4.9 has no update
  for `AWS::ApiGateway::Stage` and replaces it by creating it again ("Stage already exists"), so
  the stage is patched to the new deployment in place, and the old resource's delete leaves a
  stage that already serves a newer deployment (a start hook; the upgrade check needs it);
- reports each environment's init duration (process start to its first `invocation/next`) in
  LocalStack's log as Lambda's REPORT line does, and as JSON lines in the file named by
  `AGENTPLANE_LAMBDA_REPORT` (kinds `init`, `invoke`, `chunk`).

Selected with `LAMBDA_RUNTIME_EXECUTOR=agentplane-host` (see localstack/emulator.sh).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from localstack.runtime import hooks
from localstack.services.lambda_.invocation.lambda_models import FunctionVersion, InvocationResult
from localstack.services.lambda_.invocation.plugins import RuntimeExecutorPlugin
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

LOG = logging.getLogger(__name__)
PREFIX = "/2018-06-01/runtime"
STREAM_CONTENT_TYPE = "application/vnd.awslambda.http-integration-response"
LOG_LIMIT = 256 * 1024
_report_lock = threading.Lock()


def _report(record: dict) -> None:
    path = os.environ.get("AGENTPLANE_LAMBDA_REPORT")
    if not path:
        return
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with _report_lock:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line)


class _Invocation:
    def __init__(self, request_id: str, arn: str, payload: str, trace_id: str, deadline_ms: int):
        self.request_id = request_id
        self.arn = arn
        self.payload = payload
        self.trace_id = trace_id
        self.deadline_ms = deadline_ms
        self.future: Future[tuple[bytes, bool]] = Future()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    executor: "HostRuntimeExecutor"

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        LOG.debug("runtime api %s: " + format, self.executor.function_name, *args)

    def _answer(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _read_body(self, on_chunk=None) -> tuple[bytes, dict]:
        """The request body, de-chunked when chunked; `on_chunk(bytes)` as each chunk arrives.
        Returns the body and any trailers."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            trailers = {}
            while True:
                line = self.rfile.readline()
                if not line:
                    break
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:
                        t = self.rfile.readline()
                        if not t or t in (b"\r\n", b"\n"):
                            break
                        name, _, value = t.decode("latin-1").partition(":")
                        trailers[name.strip()] = value.strip()
                    break
                chunk = self.rfile.read(size)
                self.rfile.readline()  # the CRLF after the chunk
                parts.append(chunk)
                if on_chunk:
                    on_chunk(chunk)
            return b"".join(parts), trailers
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if on_chunk and body:
            on_chunk(body)
        return body, {}

    def do_GET(self):  # noqa: N802 - http.server's naming
        if self.path != f"{PREFIX}/invocation/next":
            return self._answer(404)
        ex = self.executor
        ex.ready.set()
        inv = ex.next_invocation()
        if inv is None:
            # Shutting down: hold the runtime until its process is ended.
            time.sleep(3600)
            return None
        return self._answer(
            200,
            inv.payload.encode("utf-8"),
            {
                "Content-Type": "application/json",
                "Lambda-Runtime-Aws-Request-Id": inv.request_id,
                "Lambda-Runtime-Deadline-Ms": str(inv.deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": inv.arn,
                "Lambda-Runtime-Trace-Id": inv.trace_id,
            },
        )

    def do_POST(self):  # noqa: N802
        ex = self.executor
        path = self.path
        if path == f"{PREFIX}/init/error":
            body, _ = self._read_body()
            ex.init_error = body or b'{"errorType":"Runtime.InitError"}'
            ex.ready.set()
            return self._answer(202)
        if not path.startswith(f"{PREFIX}/invocation/"):
            return self._answer(404)
        rest = path[len(f"{PREFIX}/invocation/") :]
        request_id, _, kind = rest.partition("/")
        inv = ex.current
        if inv is None or inv.request_id != request_id:
            self._read_body()
            return self._answer(400, b'{"errorType":"InvalidRequestID"}')
        if kind == "error":
            body, _ = self._read_body()
            inv.future.set_result((body, True))
            return self._answer(202)
        if kind != "response":
            return self._answer(404)
        streaming = self.headers.get("Lambda-Runtime-Function-Response-Mode", "").lower() == "streaming"
        if not streaming:
            body, _ = self._read_body()
            inv.future.set_result((body, False))
            return self._answer(202)
        offset = [0]

        def on_chunk(chunk: bytes) -> None:
            _report(
                {
                    "kind": "chunk",
                    "function": ex.function_name,
                    "request_id": request_id,
                    "at_ms": time.time() * 1000.0,
                    "offset": offset[0],
                    "data": chunk[:4096].decode("utf-8", "replace"),
                }
            )
            offset[0] += len(chunk)

        body, trailers = self._read_body(on_chunk)
        self._answer(202)
        error_type = trailers.get("Lambda-Runtime-Function-Error-Type")
        if error_type:
            detail = trailers.get("Lambda-Runtime-Function-Error-Body", "")
            try:
                detail = base64.b64decode(detail).decode("utf-8", "replace")
            except Exception:  # noqa: BLE001 - the trailer is informational
                pass
            LOG.warning("%s: streamed response ended with %s: %s", ex.function_name, error_type, detail)
        content_type = self.headers.get("Content-Type", "")
        inv.future.set_result((_buffered(body) if content_type.startswith(STREAM_CONTENT_TYPE) else body, False))
        return None


def _buffered(body: bytes) -> bytes:
    """A streamed HTTP integration response (prelude JSON, eight NUL bytes, body) as the
    buffered API Gateway proxy answer."""
    marker = body.find(b"\x00" * 8)
    if marker < 0:
        prelude, payload = {}, body
    else:
        try:
            prelude = json.loads(body[:marker] or b"{}")
        except ValueError:
            prelude = {}
        payload = body[marker + 8 :]
    headers = dict(prelude.get("headers") or {})
    multi = {}
    cookies = prelude.get("cookies") or []
    if cookies:
        multi["Set-Cookie"] = list(cookies)
    try:
        text, is_b64 = payload.decode("utf-8"), False
    except UnicodeDecodeError:
        text, is_b64 = base64.b64encode(payload).decode("ascii"), True
    answer = {
        "statusCode": int(prelude.get("statusCode") or 200),
        "headers": headers,
        "body": text,
        "isBase64Encoded": is_b64,
    }
    if multi:
        answer["multiValueHeaders"] = multi
    return json.dumps(answer).encode("utf-8")


class HostRuntimeExecutor(RuntimeExecutor):
    def __init__(self, id: str, function_version: FunctionVersion) -> None:  # noqa: A002
        super().__init__(id, function_version)
        self.function_name = function_version.id.function_name
        self.server: ThreadingHTTPServer | None = None
        self.process: subprocess.Popen | None = None
        self.pending: queue.Queue[_Invocation | None] = queue.Queue()
        self.current: _Invocation | None = None
        self.ready = threading.Event()
        self.init_error: bytes | None = None
        self.env: dict[str, str] = {}
        self.logs = bytearray()
        self.logs_lock = threading.Lock()
        self.stopped = False

    # -- the Runtime API side ------------------------------------------------------------------
    def next_invocation(self) -> _Invocation | None:
        inv = self.pending.get()
        self.current = inv
        return inv

    # -- process management --------------------------------------------------------------------
    def _collect(self, stream) -> None:
        for line in iter(stream.readline, b""):
            with self.logs_lock:
                self.logs += line
                if len(self.logs) > LOG_LIMIT:
                    del self.logs[: len(self.logs) - LOG_LIMIT]

    def _spawn(self) -> float:
        code = self.function_version.config.code.get_unzipped_code_location()
        bootstrap = os.path.join(str(code), "bootstrap")
        if not os.path.exists(bootstrap):
            raise LambdaRuntimeException(f"{self.function_name}: no bootstrap in the code ({code})")
        os.chmod(bootstrap, 0o755)
        self.ready.clear()
        self.init_error = None
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [bootstrap],
            cwd=str(code),
            env=self.env | {"LAMBDA_TASK_ROOT": str(code)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, args=(self.process.stdout,), daemon=True).start()
        deadline = time.monotonic() + 30
        while not self.ready.wait(0.01):
            if self.process.poll() is not None:
                raise LambdaRuntimeException(
                    f"{self.function_name}: bootstrap exited with {self.process.returncode} during init:\n"
                    + self.get_logs()[-4000:]
                )
            if time.monotonic() > deadline:
                raise LambdaRuntimeException(f"{self.function_name}: no invocation/next within 30 s")
        if self.init_error is not None:
            raise LambdaRuntimeException(
                f"{self.function_name}: init error {self.init_error[:2000]!r}\n" + self.get_logs()[-4000:]
            )
        return (time.perf_counter() - started) * 1000.0

    def _kill(self) -> None:
        proc = self.process
        self.process = None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    # -- RuntimeExecutor ------------------------------------------------------------------------
    def start(self, env_vars: dict[str, str]) -> None:
        self.env = {k: str(v) for k, v in env_vars.items()}
        self.env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        handler = type("Handler", (_Handler,), {"executor": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.env["AWS_LAMBDA_RUNTIME_API"] = f"127.0.0.1:{port}"
        init_ms = self._spawn()
        LOG.info("REPORT %s Init Duration: %.2f ms (host process on 127.0.0.1:%d)", self.function_name, init_ms, port)
        _report({"kind": "init", "function": self.function_name, "init_ms": round(init_ms, 2), "at_ms": time.time() * 1000.0})

    def stop(self) -> None:
        self.stopped = True
        self.pending.put(None)
        self._kill()
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        port = self.server.server_address[1] if self.server else 0
        return f"http://127.0.0.1:{port}"

    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        timeout_s = float(self.function_version.config.timeout or 3)
        inv = _Invocation(
            request_id=payload["invoke-id"],
            arn=payload.get("invoked-function-arn", ""),
            payload=payload.get("payload") or "{}",
            trace_id=payload.get("trace-id", ""),
            deadline_ms=int((time.time() + timeout_s) * 1000),
        )
        with self.logs_lock:
            log_start = len(self.logs)
        started = time.perf_counter()
        self.pending.put(inv)
        try:
            while True:
                try:
                    body, is_error = inv.future.result(timeout=0.2)
                    break
                except TimeoutError:
                    if self.process is None or self.process.poll() is not None:
                        code = self.process.returncode if self.process else None
                        body = json.dumps(
                            {"errorType": "Runtime.ExitError", "errorMessage": f"RequestId: {inv.request_id} Error: Runtime exited with {code}"}
                        ).encode()
                        is_error = True
                        self._restart()
                        break
                    if time.perf_counter() - started > timeout_s:
                        body = json.dumps(
                            {"errorType": "Sandbox.Timedout", "errorMessage": f"RequestId: {inv.request_id} Error: Task timed out after {timeout_s:.2f} seconds"}
                        ).encode()
                        is_error = True
                        self._restart()
                        break
        finally:
            self.current = None
        duration_ms = (time.perf_counter() - started) * 1000.0
        _report(
            {
                "kind": "invoke",
                "function": self.function_name,
                "request_id": inv.request_id,
                "duration_ms": round(duration_ms, 2),
                "error": is_error,
                "at_ms": time.time() * 1000.0,
            }
        )
        with self.logs_lock:
            logs = bytes(self.logs[min(log_start, len(self.logs)) :]).decode("utf-8", "replace")
        return InvocationResult(inv.request_id, body, is_error=is_error, logs=logs)

    def _restart(self) -> None:
        """After a timeout or a crash: a fresh process (Lambda's next invoke re-inits too)."""
        self._kill()
        self.pending = queue.Queue()
        if self.stopped:
            return
        try:
            init_ms = self._spawn()
            _report({"kind": "init", "function": self.function_name, "init_ms": round(init_ms, 2), "at_ms": time.time() * 1000.0, "restart": True})
        except LambdaRuntimeException as err:
            LOG.warning("%s", err)

    def get_logs(self) -> str:
        with self.logs_lock:
            return bytes(self.logs).decode("utf-8", "replace")

    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        # Unzip the code; no runtime image, no runtime-emulator download.
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        return True


class HostRuntimeExecutorPlugin(RuntimeExecutorPlugin):
    name = "agentplane-host"

    def load(self, *args, **kwargs):
        return HostRuntimeExecutor



@hooks.on_infra_start()
def agentplane_fast_cfn_poll() -> None:
    """CloudFormation's per-resource poll, shortened (see the module's docstring)."""
    try:
        from localstack.services.cloudformation.resource_provider import ResourceProviderExecutor

        poll = float(os.environ.get("AGENTPLANE_CFN_POLL_S") or 0.2)
        defaults = ResourceProviderExecutor.deploy_loop.__defaults__
        if defaults and len(defaults) == 2:
            ResourceProviderExecutor.deploy_loop.__defaults__ = (defaults[0], poll)
            LOG.info("CloudFormation resource poll: %.2f s", poll)
    except Exception as err:  # noqa: BLE001 - an optimisation only
        LOG.warning("could not shorten the CloudFormation poll: %s", err)


def _stage_update(self, request):
    """`AWS::ApiGateway::Stage` update, which LocalStack 4.9 leaves unimplemented: its fallback
    then creates the stage again ("Stage already exists") whenever a stack update gives the API
    a new deployment (any change of the API's definition or properties). The stage is patched
    in place instead, as CloudFormation does on AWS: its deployment, description, tracing and
    variables (LocalStack's create ignores the rest, such as method and access log settings)."""
    from localstack.services.cloudformation.resource_provider import OperationStatus, ProgressEvent

    model = request.desired_state
    previous = request.previous_state or {}
    apigw = request.aws_client_factory.apigateway
    ops = []
    for prop, path in (("DeploymentId", "/deploymentId"), ("Description", "/description")):
        if model.get(prop) is not None and model.get(prop) != previous.get(prop):
            ops.append({"op": "replace", "path": path, "value": str(model[prop])})
    if "TracingEnabled" in model:
        ops.append({"op": "replace", "path": "/tracingEnabled", "value": str(bool(model["TracingEnabled"])).lower()})
    old_vars = previous.get("Variables") or {}
    new_vars = model.get("Variables") or {}
    for key, value in new_vars.items():
        ops.append({"op": "replace", "path": f"/variables/{key}", "value": str(value)})
    for key in old_vars.keys() - new_vars.keys():
        ops.append({"op": "remove", "path": f"/variables/{key}"})
    if ops:
        apigw.update_stage(restApiId=model["RestApiId"], stageName=model.get("StageName", "default"), patchOperations=ops)
    return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model, custom_context=request.custom_context)


def _stage_create(original):
    """A stage create that finds its stage already there (LocalStack replaces the stage when the
    API it names is updated: the new one is created before the old one is deleted) patches that
    stage to the new deployment instead of failing with "Stage already exists"."""

    def create(self, request):
        model = request.desired_state
        apigw = request.aws_client_factory.apigateway
        try:
            apigw.get_stage(restApiId=model["RestApiId"], stageName=model.get("StageName", "default"))
        except Exception:  # noqa: BLE001 - no such stage: create it as LocalStack does
            return original(self, request)
        return _stage_update(self, request)

    return create


def _stage_delete(original):
    """The old stage's delete after such a replacement: the stage now serves a newer deployment
    than the one this resource knew, so it is not this resource's to delete."""

    def delete(self, request):
        model = request.desired_state
        apigw = request.aws_client_factory.apigateway
        try:
            stage = apigw.get_stage(restApiId=model["RestApiId"], stageName=model["StageName"])
            if model.get("DeploymentId") and stage.get("deploymentId") != model["DeploymentId"]:
                from localstack.services.cloudformation.resource_provider import OperationStatus, ProgressEvent

                return ProgressEvent(status=OperationStatus.SUCCESS, resource_model=model)
        except Exception:  # noqa: BLE001 - let LocalStack's delete decide
            pass
        return original(self, request)

    return delete


@hooks.on_infra_start()
def agentplane_stage_update() -> None:
    """Stack updates that change the REST API update its stage in place (see `_stage_update`)."""
    try:
        from localstack.services.apigateway.resource_providers.aws_apigateway_stage import (
            ApiGatewayStageProvider,
        )

        ApiGatewayStageProvider.update = _stage_update
        ApiGatewayStageProvider.create = _stage_create(ApiGatewayStageProvider.create)
        ApiGatewayStageProvider.delete = _stage_delete(ApiGatewayStageProvider.delete)
        LOG.info("AWS::ApiGateway::Stage updates patch the stage in place")
    except Exception as err:  # noqa: BLE001 - without it, such an update recreates the stack
        LOG.warning("could not install the stage update: %s", err)
