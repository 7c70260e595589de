"""kerasenv.lab's helpers: the URL, loopback-only ports, the port check, fresh tokens, and
waiting for the server (against a local HTTP stub; no Docker)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kerasenv.run import lab
from kerasenv.errors import EXIT_USAGE, KerasenvError, UsageError


def test_url_is_loopback_with_the_token():
    assert lab.url(8888, "abc") == "http://127.0.0.1:8888/lab?token=abc"
    assert lab.url(18001, "t0k", "api/status") == "http://127.0.0.1:18001/api/status?token=t0k"


def test_ports_publish_the_server_on_the_hosts_loopback_only():
    assert lab.ports(18123) == {"8888/tcp": ("127.0.0.1", 18123)}
    assert lab.PORT_IN_CONTAINER == 8888 == lab.DEFAULT_PORT


def test_new_tokens_are_48_hex_characters_and_never_repeat():
    tokens = [lab.new_token() for _ in range(200)]
    assert all(len(t) == 48 and int(t, 16) >= 0 and t == t.lower() for t in tokens)
    assert len(set(tokens)) == len(tokens)
    assert len(set("".join(tokens))) == 16  # every hex digit turns up: not a constant pattern


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_port_accepts_a_free_port():
    assert lab.check_port(free_port()) is None


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_check_port_refuses_a_taken_port_in_one_line(bind):
    with socket.socket() as held:
        held.bind((bind, 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(UsageError) as info:
            lab.check_port(port)
    message = info.value.message
    assert info.value.exit_code == EXIT_USAGE and "\n" not in message
    assert f"port {port} on 127.0.0.1 is in use" in message and "--port" in message


def test_check_port_never_suggests_a_port_above_65535(monkeypatch):
    class Taken(socket.socket):
        def bind(self, address):
            raise OSError(98, "Address already in use")

    monkeypatch.setattr(lab.socket, "socket", Taken)
    with pytest.raises(UsageError) as info:
        lab.check_port(65535)
    assert "65536" not in info.value.message and "in use" in info.value.message


@pytest.mark.parametrize("port", [0, -1, 65536, 100000])
def test_check_port_refuses_what_is_not_a_tcp_port(port):
    with pytest.raises(UsageError, match=f"--port {port} is not a TCP port"):
        lab.check_port(port)


# --- readiness ----------------------------------------------------------------------------------

class Stub(BaseHTTPRequestHandler):
    token = "good"

    def do_GET(self):
        if self.path == f"/api/status?token={Stub.token}":
            body, code = json.dumps({"started": "2026-01-01T00:00:00Z", "kernels": 0}).encode(), 200
        else:
            body, code = b'{"message": "Forbidden"}', 403
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_server():
    server = HTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_is_ready_needs_the_authenticated_status_api(stub_server):
    assert lab.is_ready(stub_server, "good") is True
    assert lab.is_ready(stub_server, "wrong") is False  # 403
    assert lab.is_ready(free_port(), "good") is False  # nothing listens


class FakeContainer:
    def __init__(self, status="running", exit_code=0, logs=b""):
        self.status, self.name, self._logs = status, "kerasenv-lab-x", logs
        self.attrs = {"State": {"ExitCode": exit_code}}
        self.reloads = 0

    def reload(self):
        self.reloads += 1

    def logs(self, tail=None):
        return self._logs


def test_wait_ready_returns_once_the_server_answers(stub_server):
    lab.wait_ready(FakeContainer(), stub_server, "good", timeout=10)


def test_wait_ready_reports_a_server_that_exited_with_its_last_lines():
    container = FakeContainer(status="exited", exit_code=2, logs=b"kerasenv: JUPYTER_TOKEN is empty\n")
    with pytest.raises(KerasenvError) as info:
        lab.wait_ready(container, free_port(), "t", timeout=10)
    assert "exited before it served (exit 2)" in info.value.message
    assert "JUPYTER_TOKEN is empty" in str(info.value.details)


def test_wait_ready_gives_up_after_its_timeout_naming_the_container():
    with pytest.raises(KerasenvError, match=r"did not answer on 127\.0\.0\.1:\d+ within 1 s: see `docker logs kerasenv-lab-x`"):
        lab.wait_ready(FakeContainer(), free_port(), "t", timeout=1)


def test_announce_prints_the_url_when_waiting(stub_server):
    said = []
    lab.announce(stub_server, "good", said.append, wait=True)(FakeContainer())
    assert said == [f"kerasenv: JupyterLab is up: http://127.0.0.1:{stub_server}/lab?token=good"]


def test_announce_in_the_background_says_nothing_for_a_server_that_exited():
    said = []
    before = set(threading.enumerate())
    lab.announce(free_port(), "t", said.append, wait=False)(FakeContainer(status="exited"))
    started = [t for t in threading.enumerate() if t not in before]  # its thread only: not every
    for thread in started:                                          # daemon thread of the session
        thread.join(timeout=5)
    assert not any(t.is_alive() for t in started)
    assert said == []


def test_announce_waiting_raises_for_a_server_that_exited():
    with pytest.raises(KerasenvError, match="exited before it served"):
        lab.announce(free_port(), "t", print, wait=True)(FakeContainer(status="exited", exit_code=1))
