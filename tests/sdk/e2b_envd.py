"""The e2b SDK (2.x) as its users drive it: `Sandbox.create()` through Agentplane's sandbox API
(E2B_API_URL=<base>/sandbox/v1, E2B_API_KEY=<project key>), then commands and files through the
node's envd (E2B_SANDBOX_URL). Prints one JSON object of what it saw; tests/envd.rs asserts on
it and reads the same processes back through the process API.
"""

import json

from e2b import CommandExitException, Sandbox

sbx = Sandbox.create(timeout=300)
seen = {"sandbox": sbx.sandbox_id}
result = sbx.commands.run("echo hi; echo oops >&2")
seen["stdout"], seen["stderr"], seen["exit"] = result.stdout, result.stderr, result.exit_code
try:
    sbx.commands.run("exit 3")
except CommandExitException as err:
    seen["failed"] = err.exit_code
handle = sbx.commands.run("cat", background=True, stdin=True)
sbx.commands.send_stdin(handle.pid, "piped\n")
sbx.commands.close_stdin(handle.pid)
seen["cat"] = handle.wait().stdout
sleeper = sbx.commands.run("sleep 300", background=True)
seen["killed"] = sbx.commands.kill(sleeper.pid)
sbx.files.write("/home/user/a.txt", "alpha")
seen["read"] = sbx.files.read("/home/user/a.txt")
sbx.files.make_dir("/home/user/d")
seen["list"] = sorted(e.name for e in sbx.files.list("/home/user"))
sbx.files.remove("/home/user/a.txt")
seen["exists"] = sbx.files.exists("/home/user/a.txt")
try:
    sbx.files.read("/etc/passwd")
    seen["outside"] = "read"
except Exception:  # the SDK's exception for envd's refusal
    seen["outside"] = "refused"
print(json.dumps(seen))
