"""A small threaded TCP proxy for HTTP/1.1 that injects registry faults.

It sits between the Docker daemon and a real registry. Each request's head is read and
logged, `Connection: close` is forced (so one connection carries one request and bodies,
chunked or not, are relayed as raw bytes), then either the request is relayed to the
registry or a fault is injected: an HTTP error status, or a connection reset (RST).
A `hook` may run before a request is relayed, e.g. to stop the registry mid-way.
While the registry is unreachable, requests get a reset, as from a load balancer whose
backend has gone.

The daemon first tries https on a 127.0.0.0/8 registry and falls back to plain http when
the server answers TLS with HTTP; the proxy answers a TLS ClientHello as Go's HTTP server
does ("HTTP/1.0 400 Bad Request").
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from dataclasses import dataclass, field

REASONS = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}


@dataclass
class Rule:
    """Inject `action` ("reset", or an HTTP status like 503) into the next `times` requests
    whose method is in `methods` and whose path matches `path` (a regex)."""

    methods: tuple[str, ...]
    path: str
    action: str | int
    times: float = 1  # float("inf"): every matching request
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.hits < self.times and method in self.methods and re.search(self.path, path) is not None


@dataclass
class Seen:
    method: str
    path: str
    action: str  # "relayed", "reset", "502", ... , "upstream down"


@dataclass
class FaultProxy:
    upstream_port: int
    rules: list[Rule] = field(default_factory=list)
    log: list[Seen] = field(default_factory=list)
    hook: object = None  # callable(method, path), run before relaying a request

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def requests(self, method: str, path_regex: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.log if s.method == method and re.search(path_regex, s.path)]

    def close(self) -> None:
        self._closed = True
        self._server.close()
        with self._lock:
            for s in list(self._open):
                _close(s)

    # --- internals ----------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _track(self, s: socket.socket) -> socket.socket:
        with self._lock:
            self._open.add(s)
        return s

    def _handle(self, client: socket.socket) -> None:
        self._track(client)
        upstream = None
        try:
            client.settimeout(30)
            data = client.recv(65536)
            if data[:1] == b"\x16":  # a TLS ClientHello: answer as Go's net/http server does
                client.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
                return
            while b"\r\n\r\n" not in data and len(data) < 65536:
                more = client.recv(65536)
                if not more:
                    return
                data += more
            head, sep, rest = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = (lines[0].split(" ") + ["", ""])[:2]
            headers = [h for h in lines[1:] if h.split(":", 1)[0].strip().lower()
                       not in ("connection", "keep-alive", "proxy-connection")]
            with self._lock:
                rule = next((r for r in self.rules if r.matches(method, path)), None)
                if rule:
                    rule.hits += 1
            if rule is not None:
                action = str(rule.action)
                self._log(method, path, action)
                if rule.action == "reset":
                    _reset(client)
                else:
                    self._drain_body(client, headers, rest)
                    status = int(rule.action)
                    body = f"{status} {REASONS.get(status, 'Error')} (injected by the test proxy)\n".encode()
                    client.sendall(f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\nContent-Type: text/plain\r\n"
                                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
                return
            if callable(self.hook):
                self.hook(method, path)
            try:
                upstream = self._track(socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5))
            except OSError:
                self._log(method, path, "upstream down")
                _reset(client)
                return
            self._log(method, path, "relayed")
            upstream.settimeout(120)
            new_head = "\r\n".join([lines[0], *headers, "Connection: close"]).encode("latin-1")
            upstream.sendall(new_head + sep + rest)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join(130)
        except OSError:
            pass
        finally:
            for s in (client, upstream):
                if s is not None:
                    with self._lock:
                        self._open.discard(s)
                    _close(s)

    def _log(self, method: str, path: str, action: str) -> None:
        with self._lock:
            self.log.append(Seen(method, path, action))

    @staticmethod
    def _drain_body(client: socket.socket, headers: list[str], rest: bytes) -> None:
        """Read a small Content-Length body, so closing sends FIN, not RST (unread data)."""
        length = next((int(h.split(":", 1)[1]) for h in headers
                       if h.split(":", 1)[0].strip().lower() == "content-length"), 0)
        length = min(length, 1 << 20) - len(rest)
        client.settimeout(5)
        while length > 0:
            chunk = client.recv(min(length, 65536))
            if not chunk:
                break
            length -= len(chunk)


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _reset(s: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST ("connection reset by peer")."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(s)


def _close(s: socket.socket) -> None:
    try:
        s.close()
    except OSError:
        pass
