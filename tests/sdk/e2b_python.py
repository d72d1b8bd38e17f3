"""The sandbox lifecycle driven by the real e2b Python SDK (2.x), pointed at Agentplane with
E2B_API_URL=<base>/sandbox/v1 and E2B_API_KEY=<project key>. Prints one JSON object of what a
user of the SDK reads; tests/e2b_sdk.rs asserts on it. Commands and files need envd: not here."""

import json
import os
import uuid

from e2b import Sandbox, SandboxQuery, SandboxState
from e2b.exceptions import SandboxException

tag = uuid.uuid4().hex
seen = {}


def info_of(sandbox):
    info = sandbox.get_info()
    return {
        "id": info.sandbox_id,
        "template": info.template_id,
        "state": info.state.value,
        "metadata": info.metadata,
        "envd_version": info.envd_version,
        "cpu_count": info.cpu_count,
        "memory_mb": info.memory_mb,
        "end_at": info.end_at.timestamp(),
        "started_at": info.started_at.timestamp(),
    }


sbx = Sandbox.create(timeout=300, metadata={"suite": tag, "role": "main"})
seen["create"] = {"id": sbx.sandbox_id, "token": sbx._envd_access_token, "running": None}
seen["info"] = info_of(sbx)

sbx.set_timeout(900)
seen["after_timeout"] = info_of(sbx)
try:
    sbx.set_timeout(60)
    seen["short_timeout"] = "accepted"
except SandboxException as err:
    seen["short_timeout"] = str(err)

others = [Sandbox.create(metadata={"suite": tag, "role": "other"}) for _ in range(2)]

pages = []
paginator = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}), limit=2)
while paginator.has_next:
    pages.append([s.sandbox_id for s in paginator.next_items()])
seen["pages"] = pages

seen["paused"] = sbx.pause()
paused = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}, state=[SandboxState.PAUSED]))
seen["paused_listed"] = [s.sandbox_id for s in paused.next_items()]

same = Sandbox.connect(sbx.sandbox_id)
seen["connect"] = {"id": same.sandbox_id, "token": same._envd_access_token}
seen["after_connect"] = info_of(same)

seen["killed"] = [s.kill() for s in others]
seen["kill_again"] = others[0].kill()
remaining = Sandbox.list(query=SandboxQuery(metadata={"suite": tag}))
seen["after_kill"] = [s.sandbox_id for s in remaining.next_items()]
seen["main_killed"] = Sandbox.kill(sbx.sandbox_id)

try:
    Sandbox.connect(sbx.sandbox_id)
    seen["connect_killed"] = "connected"
except SandboxException as err:
    seen["connect_killed"] = type(err).__name__

print(json.dumps(seen))
