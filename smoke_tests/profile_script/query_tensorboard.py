"""Start TensorBoard over /workspace/runs in this container and ask the profile plugin's
HTTP API what it serves: GET /data/plugin/profile/runs, then /run_tools?run=<each run>.
Prints one JSON line: {"runs": [...], "tools": {run: [...]}, "plugins": [...]}; exits 1
when TensorBoard never answered. TensorBoard is stopped before it exits."""

import gzip
import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PORT = 6006
BASE = f"http://127.0.0.1:{PORT}"


def get(path: str):
    with urllib.request.urlopen(BASE + path, timeout=10) as response:
        body = response.read()
        if response.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return json.loads(body.decode())


server = subprocess.Popen(["tensorboard", "--logdir", "/workspace/runs", "--host", "127.0.0.1", "--port", str(PORT)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    runs, last_error = [], None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            runs = get("/data/plugin/profile/runs")
            if runs:
                break
        except (urllib.error.URLError, ConnectionError, OSError) as exc:
            last_error = repr(exc)
        time.sleep(1)
    if not runs:
        print(json.dumps({"error": last_error, "exit": server.poll()}))
        sys.exit(1)
    tools = {run: get("/data/plugin/profile/run_tools?run=" + urllib.parse.quote(run)) for run in runs}
    plugins = sorted(get("/data/plugins_listing"))
    print(json.dumps({"runs": runs, "tools": tools, "plugins": plugins}))
finally:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
