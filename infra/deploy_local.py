"""Deploys infra/template.yaml into a running LocalStack (CloudFormation with the SAM transform).

Called by infra/deploy-local.sh after `cargo lambda build`; see that script for the settings.
It packages the template as `sam package` would (each function's `CodeUri` becomes its zip in an
artifacts bucket, keyed by content so unchanged code is not redeployed), deploys it through a
change set (CREATE the first time, UPDATE after; a change set without changes is "no changes"),
waits for the stack, and writes what the smoke suite needs to `--out` (the API's URL, the
functions and their binaries, the bootstrap sizes). No secret is written anywhere.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import zipfile
from pathlib import Path

import boto3
from botocore.config import Config


def log(msg: str) -> None:
    print(f"[deploy] {msg}", file=sys.stderr, flush=True)


def client(name: str, endpoint: str):
    return boto3.client(
        name,
        endpoint_url=endpoint,
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 5, "mode": "standard"}, read_timeout=300),
    )


def functions_of(template_text: str) -> list[tuple[str, str, str]]:
    """(logical id, binary, the route or job it serves) of every function, in template order: each
    function is its own binary, named for the route or job it serves."""
    out = []
    current = None
    for line in template_text.splitlines():
        m = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
        if m:
            current = m.group(1)
        m = re.match(r"^\s+Binary:\s*(\S+)\s*$", line)
        if m and current:
            out.append((current, m.group(1), m.group(1)))
    return out


def package(template_text: str, code: dict[str, tuple[str, str]]) -> str:
    """The template with each function's `CodeUri: ..` pointing at its zip (bucket, key)."""
    lines = template_text.splitlines(keepends=True)
    binary = None
    out = []
    for line in lines:
        m = re.match(r"^\s+Binary:\s*(\S+)\s*$", line)
        if m:
            binary = m.group(1)
        m = re.match(r"^(\s+)CodeUri:\s*\.\.\s*$", line)
        if m:
            if binary is None or binary not in code:
                raise SystemExit(f"no built bootstrap for the function before: {line.strip()} ({binary})")
            bucket, key = code[binary]
            line = f"{m.group(1)}CodeUri: s3://{bucket}/{key}\n"
            binary = None
        out.append(line)
    return "".join(out)


def bootstrap_size(zip_path: Path) -> int:
    with zipfile.ZipFile(zip_path) as z:
        return z.getinfo("bootstrap").file_size


def wait_change_set(cfn, stack: str, name: str) -> str:
    while True:
        cs = cfn.describe_change_set(StackName=stack, ChangeSetName=name)
        status = cs["Status"]
        if status in ("CREATE_COMPLETE", "FAILED"):
            reason = cs.get("StatusReason", "")
            if status == "FAILED" and ("didn't contain changes" in reason or "No updates" in reason):
                return "NO_CHANGES"
            if status == "FAILED":
                raise SystemExit(f"change set failed: {reason}")
            if not cs.get("Changes") and cs.get("ExecutionStatus") != "AVAILABLE":
                return "NO_CHANGES"
            return status
        time.sleep(1)


def declared_parameters(template_text: str) -> set[str]:
    """The names under the template's top-level `Parameters:` section."""
    names, inside = set(), False
    for line in template_text.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            inside = line.rstrip() == "Parameters:"
            continue
        stripped = line.rstrip()
        if inside and stripped.startswith("  ") and not stripped.startswith("   ") and stripped.endswith(":"):
            names.add(stripped.strip()[:-1])
    return names


def change_set_changes(cfn, stack: str, name: str) -> list[dict]:
    """Each resource change of a change set: logical id, type, action and replacement."""
    out, token = [], None
    while True:
        kw = {"StackName": stack, "ChangeSetName": name}
        if token:
            kw["NextToken"] = token
        cs = cfn.describe_change_set(**kw)
        for c in cs.get("Changes", []):
            rc = c.get("ResourceChange", {})
            out.append({
                "logical_id": rc.get("LogicalResourceId", ""),
                "type": rc.get("ResourceType", ""),
                "action": rc.get("Action", ""),
                "replacement": rc.get("Replacement", ""),
            })
        token = cs.get("NextToken")
        if not token:
            return out


def restore_stage(endpoint: str, api_id: str, stage: str = "v1") -> None:
    """LocalStack 4.9 can lose the REST API's stage in a stack update that gives the API a new
    deployment (it replaces the stage: the new one is created, then the old one's delete removes
    it). AWS updates the stage in place. The stage holds no data, so a local deploy deploys the
    API again onto it, and says so."""
    if not api_id:
        return
    apigw = client("apigateway", endpoint)
    if any(s["stageName"] == stage for s in apigw.get_stages(restApiId=api_id).get("item", [])):
        return
    # A new deployment: the API as the update left it (every route), on a new stage.
    made = apigw.create_deployment(restApiId=api_id, stageName=stage)
    log(f"LocalStack lost the API's stage {stage} in the update: made again on a new deployment {made['id']}")


def stack_status(cfn, stack: str) -> str | None:
    try:
        return cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except cfn.exceptions.ClientError as err:
        if "does not exist" in str(err):
            return None
        raise


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--stack", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--lambda-dir", required=True)
    ap.add_argument("--bucket", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--report", default="")
    ap.add_argument("--param", action="append", default=[], help="Key=Value")
    args = ap.parse_args()

    template_path = Path(args.template)
    text = template_path.read_text()
    fns = functions_of(text)
    lambda_dir = Path(args.lambda_dir)
    s3 = client("s3", args.endpoint)
    cfn = client("cloudformation", args.endpoint)

    try:
        s3.head_bucket(Bucket=args.bucket)
    except Exception:  # noqa: BLE001 - missing bucket
        s3.create_bucket(Bucket=args.bucket)

    started = time.monotonic()
    code: dict[str, tuple[str, str]] = {}
    sizes: dict[str, int] = {}
    uploaded = 0
    existing = set()
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=args.bucket, Prefix="functions/"):
        for obj in page.get("Contents", []):
            existing.add(obj["Key"])
    for binary in sorted({b for _, b, _ in fns}):
        zip_path = lambda_dir / binary / "bootstrap.zip"
        if not zip_path.exists():
            raise SystemExit(f"missing {zip_path}: build with cargo lambda build -o zip first")
        data = zip_path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:20]
        key = f"functions/{binary}/{digest}.zip"
        if key not in existing:
            s3.put_object(Bucket=args.bucket, Key=key, Body=data)
            uploaded += 1
        code[binary] = (args.bucket, key)
        sizes[binary] = bootstrap_size(zip_path)
    log(f"{len(fns)} functions of {len(code)} binaries packaged ({uploaded} uploaded) in {time.monotonic() - started:.1f} s")

    packaged = package(text, code)
    template_key = f"templates/{hashlib.sha256(packaged.encode()).hexdigest()[:20]}.yaml"
    s3.put_object(Bucket=args.bucket, Key=template_key, Body=packaged.encode())
    template_url = f"{args.endpoint.rstrip('/')}/{args.bucket}/{template_key}"

    # Only the parameters this template declares: an earlier release's template (the upgrade
    # check deploys one) lacks the parameters added since.
    declared = declared_parameters(text)
    params = []
    for p in args.param:
        k, _, v = p.partition("=")
        if k in declared:
            params.append({"ParameterKey": k, "ParameterValue": v})
        else:
            log(f"parameter {k} is not in {template_path}: not passed")

    deploy_started = time.monotonic()

    def delete() -> None:
        cfn.delete_stack(StackName=args.stack)
        while stack_status(cfn, args.stack) not in (None, "DELETE_COMPLETE"):
            time.sleep(1)

    changes: list[dict] = []

    def deploy(kind: str) -> str:
        name = f"deploy-{int(time.time() * 1000)}"
        cfn.create_change_set(
            StackName=args.stack,
            ChangeSetName=name,
            ChangeSetType=kind,
            TemplateURL=template_url,
            Parameters=params,
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
        if wait_change_set(cfn, args.stack, name) == "NO_CHANGES":
            log("no changes: the stack is as deployed")
            return stack_status(cfn, args.stack) or ""
        changes.clear()
        changes.extend(change_set_changes(cfn, args.stack, name))
        cfn.execute_change_set(StackName=args.stack, ChangeSetName=name)
        want = "CREATE_COMPLETE" if kind == "CREATE" else "UPDATE_COMPLETE"
        while True:
            final = stack_status(cfn, args.stack) or ""
            if final.endswith("_COMPLETE") or final.endswith("_FAILED"):
                break
            time.sleep(1)
        if final != want:
            events = cfn.describe_stack_events(StackName=args.stack)["StackEvents"]
            for e in events[:40]:
                if "FAILED" in e.get("ResourceStatus", ""):
                    log(f"  {e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}")
            raise RuntimeError(f"stack {args.stack} ended {final}, not {want}")
        return final

    before = stack_status(cfn, args.stack)
    if before is not None and before in ("ROLLBACK_COMPLETE", "CREATE_FAILED", "DELETE_FAILED", "UPDATE_FAILED", "UPDATE_ROLLBACK_FAILED"):
        log(f"stack {args.stack} is {before}: deleting it first")
        delete()
        before = None
    if before not in (None, "DELETE_COMPLETE") and os.environ.get("AGENTPLANE_DEPLOY_FRESH") == "1":
        log(f"stack {args.stack} exists: deleting it first (AGENTPLANE_DEPLOY_FRESH=1)")
        delete()
        before = None
    kind = "CREATE" if before in (None, "DELETE_COMPLETE") else "UPDATE"
    try:
        final = deploy(kind)
    except RuntimeError as err:
        if kind != "UPDATE" or os.environ.get("AGENTPLANE_DEPLOY_RECREATE", "1") != "1":
            raise SystemExit(str(err)) from None
        # LocalStack cannot apply some updates (a changed REST API's stage: "Stage already
        # exists"); a local stack is recreated instead (its data goes with it).
        log(f"{err}: LocalStack could not update it; deleting and creating it again")
        delete()
        kind = "CREATE"
        final = deploy(kind)
    log(f"stack {args.stack}: {final} ({kind.lower()}) in {time.monotonic() - deploy_started:.1f} s")

    stack = cfn.describe_stacks(StackName=args.stack)["Stacks"][0]
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    restore_stage(args.endpoint, outputs.get("ApiId", ""))
    physical = {}
    token = None
    while True:
        kw = {"StackName": args.stack}
        if token:
            kw["NextToken"] = token
        page = cfn.list_stack_resources(**kw)
        for r in page["StackResourceSummaries"]:
            physical[r["LogicalResourceId"]] = r.get("PhysicalResourceId", "")
        token = page.get("NextToken")
        if not token:
            break
    api_id = outputs.get("ApiId") or physical.get("Api", "")
    api_url = f"{args.endpoint.rstrip('/')}/_aws/execute-api/{api_id}/v1"
    info = {
        "stack": args.stack,
        "endpoint": args.endpoint,
        "api_id": api_id,
        "api_url": api_url,
        "status": final,
        "core_key_secret_arn": outputs.get("CoreKeySecretArn", ""),
        "outputs": outputs,
        "parameters": {p["ParameterKey"]: p["ParameterValue"] for p in params},
        "lambda_report": args.report,
        # Every resource the stack holds after the SAM transform (CloudFormation's limit is 500).
        "stack_resources": len(physical),
        # What the last change set did to each resource (an update: which were replaced), and
        # every resource's physical id (the upgrade check compares them before and after).
        "changes": changes,
        "physical": physical,
        "functions": [
            {
                "logical_id": lid,
                "binary": b,
                "function": f,
                "name": physical.get(lid, ""),
                "bootstrap_bytes": sizes[b],
            }
            for lid, b, f in fns
        ],
    }
    Path(args.out).write_text(json.dumps(info, indent=2))
    print(api_url)


if __name__ == "__main__":
    main()
