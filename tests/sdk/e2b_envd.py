"""The e2b SDK (2.x) against the node's envd: commands and files as its users call them.

The SDK first asks the E2B API for the sandbox (`POST /v2/sandboxes/{id}/connect`); this
script answers that itself with the sandbox's id and envd token (Core's lifecycle routes are
tested elsewhere), so every request after it is the SDK talking to envd through
`E2B_SANDBOX_URL`. Prints one JSON object of what it saw.
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from e2b import CommandExitException, Sandbox

SANDBOX, TOKEN = os.environ["AP_SANDBOX"], os.environ["AP_TOKEN"]


class Api(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(
            {
                "sandboxID": SANDBOX,
                "templateID": "base",
                "clientID": "local",
                "envdVersion": "0.5.7",
                "envdAccessToken": TOKEN,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
threading.Thread(target=server.serve_forever, daemon=True).start()
os.environ["E2B_API_URL"] = f"http://127.0.0.1:{server.server_port}"

sbx = Sandbox.connect(SANDBOX)
seen = {}
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
print(json.dumps(seen))
