"""The E2B SDK's round trips against Agentplane (bench-sandboxes runs it): create-to-first
command (`Sandbox.create()` until `commands.run("true")` has returned) and the round trip of
`commands.run("true")` on a running sandbox, through the real e2b SDK as its users call it.
Prints one JSON object: milliseconds, each sample."""

import json
import os
import time

from e2b import Sandbox

n = int(os.environ.get("BENCH_N", "100"))
first = []
for _ in range(max(n // 10, 5)):
    t = time.perf_counter()
    sbx = Sandbox.create(timeout=300)
    sbx.commands.run("true")
    first.append((time.perf_counter() - t) * 1000)
    sbx.kill()

sbx = Sandbox.create(timeout=900)
for _ in range(5):
    sbx.commands.run("true")
runs = []
for _ in range(n):
    t = time.perf_counter()
    sbx.commands.run("true")
    runs.append((time.perf_counter() - t) * 1000)
sbx.kill()
print(json.dumps({"create_to_first": first, "run_true": runs}))
