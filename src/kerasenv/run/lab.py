"""`kerasenv lab`: a variant's JupyterLab flavour on 127.0.0.1 with a fresh token.

The token is made here for each start and handed to the server as JUPYTER_TOKEN: it is in
no image and no file, only in the URL printed to the user. The port is published on the
loopback interface only (a notebook server runs arbitrary code for whoever holds the URL).
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
import urllib.error
import urllib.request

from ..errors import KerasenvError, UsageError

PORT_IN_CONTAINER = 8888
DEFAULT_PORT = 8888
READY_TIMEOUT_S = 180


def new_token() -> str:
    return secrets.token_hex(24)


def url(port: int, token: str, path: str = "lab") -> str:
    return f"http://127.0.0.1:{port}/{path}?token={token}"


def ports(port: int) -> dict:
    """The docker SDK's `ports=`: the server's port on the host's loopback only."""
    return {f"{PORT_IN_CONTAINER}/tcp": ("127.0.0.1", port)}


def check_port(port: int) -> None:
    """Refuse a port that is taken before a container is created for it."""
    if not 1 <= port <= 65535:
        raise UsageError(f"--port {port} is not a TCP port (1-65535)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            other = port + 1 if port < 65535 else port - 1  # never a suggestion above 65535
            raise UsageError(f"port {port} on 127.0.0.1 is in use (another JupyterLab?): pass --port "
                             f"{other}, or stop what listens there") from None


def is_ready(port: int, token: str) -> bool:
    """The server answers its authenticated status API."""
    try:
        with urllib.request.urlopen(url(port, token, "api/status"), timeout=3) as response:
            return response.status == 200 and "started" in json.loads(response.read() or b"{}")
    except (OSError, ValueError, urllib.error.URLError):
        return False


def wait_ready(container, port: int, token: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Until the server answers; a container that exits first is an error with its last log lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_ready(port, token):
            return
        container.reload()
        if container.status in ("exited", "dead"):
            tail = container.logs(tail=15).decode(errors="replace")
            raise KerasenvError(f"JupyterLab exited before it served (exit {container.attrs['State']['ExitCode']}); "
                                "its last lines are below", details=tail)
        time.sleep(0.5)
    raise KerasenvError(f"JupyterLab did not answer on 127.0.0.1:{port} within {timeout:.0f} s: "
                        f"see `docker logs {container.name}`")


def announce(port: int, token: str, say, *, wait: bool):
    """on_started for runner.run: print the URL once the server answers, in a thread when
    the caller then follows the logs (`wait=False`), or before returning (`wait=True`)."""
    def ready_then_say(container) -> None:
        try:
            wait_ready(container, port, token)
        except KerasenvError:
            if wait:
                raise
            return  # the foreground run reports the container's exit itself
        say(f"kerasenv: JupyterLab is up: {url(port, token)}")

    def on_started(container) -> None:
        if wait:
            ready_then_say(container)
        else:
            threading.Thread(target=ready_then_say, args=(container,), daemon=True).start()

    return on_started
