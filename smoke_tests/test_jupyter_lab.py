"""The JupyterLab flavour kerasenv:<id>-jupyter, used as a user would: started by the real
`kerasenv lab <id>` (in the foreground), opened in headless Chromium, driven through Jupyter's REST and
kernel websocket APIs (a notebook that trains a tiny Keras model), refused without the token,
reachable on 127.0.0.1 only; and the image itself (labels, added size, pins, no token in it).

One server per variant (module fixture `lab`), always removed, also when a test fails. A
variant whose flavour is not built is a failure that says how to build it, never a skip. The
server's checks are marked once_per_group: the server's pins are the same in every variant's
requirements-jupyter.lock (tests/unit/repo/test_smoke_groups.py), and the notebook's training
differs by backend, Keras major and Python (smoke_tests/groups.py); the image's own checks
(labels, size, pins, the lock, no token in it) run on every flavour.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from kerasenv.images.sizes import unpacked_bytes

from .conftest import run_once

FAMILIES = {"cpu", "cuda"}  # the families the matrix's [jupyter] table gives a flavour
ARCHES = {"amd64"}  # the arm64 images have no JupyterLab flavour (kerasenv build refuses --platform with it)
REPO = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("KERASENV_CHROMIUM", "/usr/bin/chromium")
WINDOW = (1400, 900)
KERNEL_TIMEOUT_S = 180
URL_LINE = re.compile(r"kerasenv: JupyterLab is up: (http://127\.0\.0\.1:(\d+)/lab\?token=([0-9a-f]+))")
MARKER = "KERASENV-NOTEBOOK "

# The notebook's one cell: a tiny Keras model trained in the kernel, then one JSON line with the
# devices the backend's framework lists, the loss, the backend Keras trained on and the framework's
# version. Per backend, the first lines import it the way its users do: `from tensorflow import
# keras` is Keras 3 on TF >= 2.16 and tf.keras 2 on 2.14/2.15; JAX and PyTorch: Keras 3 itself.
CELL_IMPORTS = {
    "tensorflow": """\
import json, numpy as np, tensorflow as framework
from tensorflow import keras
devices = [[d.device_type, d.name] for d in framework.config.list_physical_devices()]
""",
    "jax": """\
import json, numpy as np, jax as framework, keras
devices = [[d.platform.upper(), str(d)] for d in framework.devices()] + \\
    ([] if framework.default_backend() == "cpu" else [["CPU", str(d)] for d in framework.devices("cpu")])
""",
    "torch": """\
import json, numpy as np, torch as framework, keras
devices = [["CPU", "cpu"]] + [["GPU", framework.cuda.get_device_name(i)]
                              for i in range(framework.cuda.device_count())]
""",
}
CELL_TRAINING = f"""\
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy")
history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
print("{MARKER}" + json.dumps({{
    "devices": devices, "loss": float(history.history["loss"][-1]),
    "backend": keras.backend.backend(), "framework": framework.__version__}}))
"""


def notebook_cell(variant) -> str:
    return CELL_IMPORTS[variant.backend] + CELL_TRAINING


# What the image holds: installed distributions, the pip constraints, `pip check`, and what
# pip says when asked to move the framework (TensorFlow, JAX or PyTorch) off its pin (offline:
# the constraint must answer).
IMAGE_PROBE = r"""
import importlib.metadata as md, json, re, subprocess, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
dists = {}
for d in md.distributions():
    if "/_vendor" not in str(d.locate_file("")):
        dists.setdefault(norm(d.metadata["Name"]), d.version)
constraints = {}
for line in open("/etc/kerasenv/constraints.txt"):
    line = line.split("#", 1)[0].strip()
    if "==" in line:
        name, version = line.split("==", 1)
        constraints[norm(name)] = version.strip()
import os
backend = os.environ.get("KERAS_BACKEND", "tensorflow")
framework = next((n for n in ("tensorflow", "tensorflow-cpu", "tensorflow-rocm") if n in dists), None) \
    if backend == "tensorflow" else (backend if backend in dists else None)
out = {"dists": dists, "constraints": constraints, "framework_dist": framework}
if len(sys.argv) > 1:
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    move = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", f"{framework}<{dists[framework]}"],
                          capture_output=True, text=True)
    out.update(pip_check=[check.returncode, check.stdout + check.stderr],
               move_framework=[move.returncode, move.stdout + move.stderr],
               pip_conf=open("/etc/pip.conf").read())
print(json.dumps(out))
"""


# --- the server -----------------------------------------------------------------------------

@dataclass
class Lab:
    url: str
    port: int
    token: str
    name: str
    container: object
    project: Path
    stderr: str

    def api(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_plain = urllib.request.build_opener(_NoRedirect)


def http(method: str, url: str, *, token: str | None = None, body=None, timeout: float = 30):
    """(status, headers, body bytes) of one request; 3xx and 4xx are answers, not errors."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        request.add_header("Authorization", f"token {token}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with _plain.open(request, timeout=timeout) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def api_json(lab: Lab, method: str, path: str, body=None, expect=(200, 201)):
    status, _, raw = http(method, lab.api(path), token=lab.token, body=body)
    assert status in expect, f"{method} /{path} answered {status}: {raw[:500]!r}"
    return json.loads(raw) if raw else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyter_image(docker, target):
    from docker.errors import ImageNotFound

    ref = target.variant.jupyter_ref
    try:
        return docker.images.get(ref)
    except ImageNotFound:
        pytest.fail(f"{ref} is not built here: build it: kerasenv build {target.variant.id} --jupyter", pytrace=False)


@pytest.fixture(scope="module")
def lab(docker, target, jupyter_image, tmp_path_factory):
    """`kerasenv lab <id>` in the foreground on a free port over a fresh project folder, as a
    user runs it in a terminal; SIGTERM at the end, after which the CLI must have removed its
    container (it is force-removed anyway, found by the CLI's pid label).

    Not `--detach` (unit-tested in tests/unit/kerasenv/run/test_session.py): a detached lab
    outlives its command, so a `make clean` in the integration lane that `make test` runs beside
    this one would remove it, and that lane's leftover check would count it (CI 2026-12-02).
    A lab whose command still runs is left alone by both."""
    project = tmp_path_factory.mktemp(f"lab-project-{target.variant.id}")
    port = free_port()
    cmd = [sys.executable, "-m", "kerasenv", "lab", target.variant.id, "--port", str(port),
           "--project", str(project)]
    log = tmp_path_factory.mktemp(f"lab-log-{target.variant.id}") / "stderr.txt"
    with log.open("w") as sink:
        proc = subprocess.Popen(cmd, cwd=REPO, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                text=True)
    started = time.monotonic()
    try:
        url_match = None
        while url_match is None:
            err = log.read_text(errors="replace")
            url_match = URL_LINE.search(err)
            if url_match is None:
                assert proc.poll() is None, f"{' '.join(cmd[2:])} exited {proc.returncode}:\n{err[-3000:]}"
                assert time.monotonic() - started < 300, f"`kerasenv lab` printed no URL within 300 s:\n{err[-3000:]}"
                time.sleep(0.5)
        assert int(url_match.group(2)) == port
        (container,) = docker.containers.list(filters={"label": [f"io.kerasenv.cli-pid={proc.pid}",
                                                                 "io.kerasenv.kind=lab"]})
        print(f"[lab] {target.variant.id}: up in {time.monotonic() - started:.1f} s at {url_match.group(1)}")
        yield Lab(url=url_match.group(1), port=port, token=url_match.group(3), name=container.name,
                  container=container, project=project, stderr=err)
        proc.terminate()
        code = proc.wait(timeout=60)
        assert code == 143, f"`kerasenv lab` exited {code} on SIGTERM:\n{log.read_text(errors='replace')[-3000:]}"
        assert not docker.containers.list(all=True, filters={"label": f"io.kerasenv.cli-pid={proc.pid}"}), \
            "`kerasenv lab` left its container behind on SIGTERM"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in docker.containers.list(all=True, filters={"label": [f"io.kerasenv.cli-pid={proc.pid}",
                                                                      "io.kerasenv.kind=lab"]}):
            c.remove(force=True)


# --- a. what the browser shows --------------------------------------------------------------

def chromium(*args: str, profile: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    assert shutil.which(CHROMIUM), f"{CHROMIUM} not found (set KERASENV_CHROMIUM)"
    return subprocess.run(
        [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=15000", f"--user-data-dir={profile}",
         "--no-first-run", *args],
        capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.once_per_group
def test_lab_renders_in_a_headless_browser(lab, target, tmp_path, capsys):
    from PIL import Image

    png = tmp_path / f"jupyterlab-{target.variant.id}.png"
    shot = chromium(f"--screenshot={png}", lab.url, profile=tmp_path / "profile-shot")
    assert shot.returncode == 0 and png.exists(), shot.stderr[-2000:]
    with Image.open(png) as img:
        assert img.size == WINDOW
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=WINDOW[0] * WINDOW[1])
    top_share = max(n for n, _ in colours) / (WINDOW[0] * WINDOW[1])
    assert len(colours) >= 64 and top_share < 0.95, (len(colours), top_share)
    with capsys.disabled():
        print(f"\n[lab] {target.variant.id}: screenshot {png} ({len(colours)} colours)")

    dom = chromium("--dump-dom", lab.url, profile=tmp_path / "profile-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout
    # JupyterLab's shell rendered (not the login page): the main area, the LabShell widget
    # and the launcher with its Python 3 kernel card.
    assert 'id="main"' in html and "jp-LabShell" in html, html[:2000]
    assert "jp-Launcher" in html and "jp-LauncherCard" in html
    assert "Python 3 (ipykernel)" in html
    assert "jp-Login" not in html and 'name="password"' not in html


# --- b. a notebook that trains, through the REST and kernel APIs ----------------------------

def jupyter_message(msg_type: str, session: str, content: dict) -> dict:
    return {
        "header": {"msg_id": uuid.uuid4().hex, "username": "kerasenv-test", "session": session,
                   "msg_type": msg_type, "version": "5.3",
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
        "parent_header": {}, "metadata": {}, "content": content, "buffers": [], "channel": "shell",
    }


def execute(lab: Lab, kernel_id: str, code: str, timeout: float = KERNEL_TIMEOUT_S) -> tuple[list, int | None]:
    """Run `code` in the kernel over /api/kernels/<id>/channels; its nbformat outputs and
    execution count, once the kernel is idle again for this request."""
    import websocket

    ws = websocket.create_connection(
        f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel_id}/channels?token={lab.token}", timeout=30)
    try:
        msg = jupyter_message("execute_request", uuid.uuid4().hex, {
            "code": code, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False, "stop_on_error": True})
        ws.send(json.dumps(msg))
        msg_id, outputs, count, seen = msg["header"]["msg_id"], [], None, []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no idle status within {timeout:.0f} s; saw {seen[-20:]}, outputs {outputs}"
            ws.settimeout(left)
            reply = json.loads(ws.recv())
            if reply.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = reply["header"]["msg_type"], reply["content"]
            seen.append(f"{reply.get('channel')}:{kind}")
            if kind == "stream":
                outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
            elif kind == "error":
                outputs.append({"output_type": "error", **{k: content[k] for k in ("ename", "evalue", "traceback")}})
            elif kind in ("execute_result", "display_data"):
                outputs.append({"output_type": kind, "data": content["data"], "metadata": content.get("metadata", {}),
                                **({"execution_count": content["execution_count"]} if kind == "execute_result" else {})})
            elif kind in ("execute_input", "execute_reply"):
                count = content.get("execution_count", count)
            elif kind == "status" and content["execution_state"] == "idle":
                return outputs, count
    finally:
        ws.close()


@pytest.mark.once_per_group
def test_a_notebook_trains_keras_in_the_kernel_and_is_saved_to_the_project(lab, target, capsys):
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "cells": [{"cell_type": "code", "id": "kerasenv-smoke", "metadata": {}, "execution_count": None,
                   "outputs": [], "source": notebook_cell(target.variant)}]}
    created = api_json(lab, "PUT", "api/contents/smoke.ipynb",
                       {"type": "notebook", "format": "json", "content": notebook})
    assert created["type"] == "notebook" and created["path"] == "smoke.ipynb"
    session = api_json(lab, "POST", "api/sessions",
                       {"path": "smoke.ipynb", "type": "notebook", "name": "smoke.ipynb", "kernel": {"name": "python3"}})
    try:
        assert session["kernel"]["name"] == "python3"
        started = time.monotonic()
        outputs, count = execute(lab, session["kernel"]["id"], notebook_cell(target.variant))
        seconds = time.monotonic() - started
        errors = [o for o in outputs if o["output_type"] == "error"]
        assert not errors, "\n".join(errors[0]["traceback"])
        stdout = "".join(o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stdout")
        line = next((ln for ln in stdout.splitlines() if ln.startswith(MARKER)), None)
        assert line, f"the cell printed no result line: {outputs}"
        result = json.loads(line[len(MARKER):])
        types = [t for t, _ in result["devices"]]
        assert types and "CPU" in types, result
        assert math.isfinite(result["loss"]), result
        assert result["backend"] == target.variant.backend
        # PyTorch's __version__ may carry its CUDA build as a local part (2.15.0+cu132).
        assert result["framework"].split("+")[0] == target.variant.framework_version
        with capsys.disabled():
            gpus = [n for t, n in result["devices"] if t == "GPU"]
            print(f"\n[lab] {target.variant.id}: the notebook trained in {seconds:.1f} s, loss {result['loss']:.4f}, "
                  f"devices {result['devices']}" + (f" (GPU: {', '.join(gpus)})" if gpus else " (no GPU)"))

        saved = api_json(lab, "GET", "api/contents/smoke.ipynb?content=1")
        content = saved["content"]
        content["cells"][0]["outputs"], content["cells"][0]["execution_count"] = outputs, count
        api_json(lab, "PUT", "api/contents/smoke.ipynb", {"type": "notebook", "format": "json", "content": content})
    finally:
        status, _, raw = http("DELETE", lab.api(f"api/sessions/{session['id']}"), token=lab.token)
        assert status == 204, (status, raw[:300])

    on_host = lab.project / "smoke.ipynb"
    assert on_host.exists(), sorted(p.name for p in lab.project.iterdir())
    st = on_host.stat()
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), "the server should run as the invoking user"
    written = json.loads(on_host.read_text())
    assert written["nbformat"] == 4 and "".join(written["cells"][0]["source"]) == notebook_cell(target.variant)
    # nbformat stores multi-line strings as lists of lines on disk
    texts = [o.get("text", "") for o in written["cells"][0]["outputs"]]
    assert MARKER in "".join("".join(t) if isinstance(t, list) else t for t in texts)
    assert session["id"] not in [s["id"] for s in api_json(lab, "GET", "api/sessions")]


# --- c. the token is required ---------------------------------------------------------------

@pytest.mark.once_per_group
@pytest.mark.parametrize("path", ["api/contents", "api/kernels", "api/sessions", "api/status"])
def test_the_api_refuses_requests_without_the_right_token(lab, path):
    assert http("GET", lab.api(path))[0] == 403
    assert http("GET", lab.api(path), token="not-" + lab.token)[0] == 403
    assert http("GET", lab.api(f"{path}?token=not-{lab.token}"))[0] == 403
    assert http("GET", lab.api(path), token=lab.token)[0] == 200


@pytest.mark.once_per_group
def test_the_lab_page_without_the_token_is_the_login(lab):
    for url in (lab.api("lab"), lab.api(f"lab?token=not-{lab.token}")):
        status, headers, body = http("GET", url)
        assert status in (302, 403) or (status == 200 and b"jp-LabShell" not in body), status
        if status == 302:
            assert headers["Location"].split("?")[0].endswith("/login"), headers["Location"]
    status, _, body = http("GET", lab.url)
    assert status == 200 and b"JupyterLab" in body


@pytest.mark.once_per_group
def test_the_kernel_websocket_refuses_a_wrong_token(lab):
    import websocket

    kernel = api_json(lab, "POST", "api/kernels", {"name": "python3"})
    try:
        with pytest.raises(websocket.WebSocketBadStatusException) as info:
            websocket.create_connection(f"ws://127.0.0.1:{lab.port}/api/kernels/{kernel['id']}/channels"
                                        f"?token=not-{lab.token}", timeout=30)
        assert info.value.status_code == 403
    finally:
        http("DELETE", lab.api(f"api/kernels/{kernel['id']}"), token=lab.token)


# --- d. loopback only, as the invoking user --------------------------------------------------

@pytest.mark.once_per_group
def test_the_port_is_published_on_127_0_0_1_only(lab, docker):
    lab.container.reload()
    attrs = lab.container.attrs
    bindings = attrs["HostConfig"]["PortBindings"]
    assert list(bindings) == ["8888/tcp"], bindings
    assert bindings["8888/tcp"] == [{"HostIp": "127.0.0.1", "HostPort": str(lab.port)}]
    published = attrs["NetworkSettings"]["Ports"]["8888/tcp"]
    assert published and {p["HostIp"] for p in published} == {"127.0.0.1"}, published
    # From the host's Docker bridge address (not loopback) nothing answers on that port.
    gateway = next((c.get("Gateway") for c in docker.networks.get("bridge").attrs["IPAM"]["Config"] or []
                    if c.get("Gateway")), None)
    if gateway:
        with socket.socket() as s:
            s.settimeout(3)
            assert s.connect_ex((gateway, lab.port)) != 0, f"port {lab.port} answers on {gateway}"


@pytest.mark.once_per_group
def test_the_server_runs_as_the_invoking_user_with_group_0(lab):
    config, host_config = lab.container.attrs["Config"], lab.container.attrs["HostConfig"]
    assert config["User"] == f"{os.getuid()}:{os.getgid()}"
    assert "0" in (host_config.get("GroupAdd") or [])
    assert lab.container.labels["io.kerasenv.kind"] == "lab"
    assert f"JUPYTER_TOKEN={lab.token}" in config["Env"]  # handed in at start, in no image


# --- e. the image -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def probes(docker, target, jupyter_image):
    """IMAGE_PROBE in the variant's image and in its flavour (offline)."""
    results = {}
    for key, ref, extra in (("base", target.ref, []), ("jupyter", target.variant.jupyter_ref, ["full"])):
        code, out, err = run_once(docker, ref, ["python", "-c", IMAGE_PROBE, *extra], network_mode="none")
        assert code == 0, f"probe in {ref} exited {code}:\n{err[-3000:]}"
        results[key] = json.loads(out.strip().splitlines()[-1])
    return results


def test_jupyter_image_labels(jupyter_image, image, target, matrix):
    labels, base = jupyter_image.labels, image.labels
    assert labels["io.kerasenv.flavour"] == "jupyter"
    assert labels["io.kerasenv.jupyterlab"] == matrix.jupyter.jupyterlab
    assert labels["org.opencontainers.image.version"] == f"{target.variant.id}-jupyter"
    assert labels["org.opencontainers.image.title"] == f"kerasenv {target.variant.id}-jupyter"
    # What the variant's labels say about its framework and its stack still holds.
    backend = target.variant.backend
    for key in ("variant", "family", "backend", backend, "keras", "python", "cuda", "cudnn", "nccl", "min-driver"):
        assert labels.get(f"io.kerasenv.{key}") == base.get(f"io.kerasenv.{key}"), key
    assert "io.kerasenv.flavour" not in base
    assert jupyter_image.attrs["Config"]["ExposedPorts"] == {"8888/tcp": {}}


def test_jupyter_layer_fits_the_added_size_budget(jupyter_image, image, target, matrix, capsys):
    # Unpacked on both image stores (attrs["Size"] is compressed on the containerd store: moby#53398).
    base_mb, lab_mb = unpacked_bytes(image) / 1e6, unpacked_bytes(jupyter_image) / 1e6
    added, budget = lab_mb - base_mb, matrix.jupyter.added_size_budget_mb
    with capsys.disabled():
        print(f"\n[lab] {target.variant.id}: {target.ref} {base_mb:.0f} MB, {target.variant.jupyter_ref} "
              f"{lab_mb:.0f} MB: +{added:.0f} MB (budget {budget} MB)")
    assert 0 < added < budget, f"+{added:.0f} MB, budget {budget} MB"


def test_the_flavour_is_built_on_the_current_variant_image(jupyter_image, image, target):
    """Not on an older build of kerasenv:<id>: what the other checks compare would differ."""
    base_layers = image.attrs["RootFS"]["Layers"]
    assert jupyter_image.attrs["RootFS"]["Layers"][:len(base_layers)] == base_layers, \
        f"{target.variant.jupyter_ref} is not built on the current {target.ref}: rebuild it " \
        f"(kerasenv build {target.variant.id} --jupyter)"


def test_the_variant_pins_still_hold_under_jupyterlab(probes, target, matrix):
    base, lab = probes["base"], probes["jupyter"]
    assert lab["pip_check"][0] == 0, lab["pip_check"][1]
    assert "constraint = /etc/kerasenv/constraints.txt" in lab["pip_conf"]
    # The variant's pins are all still constraints, at the same versions.
    lost = {n: (v, lab["constraints"].get(n)) for n, v in base["constraints"].items() if lab["constraints"].get(n) != v}
    assert base["constraints"] and lost == {}
    # Nothing the variant had changed version; the framework is the matrix's.
    changed = {n: (v, lab["dists"].get(n)) for n, v in base["dists"].items() if lab["dists"].get(n) != v}
    assert changed == {}
    framework = base["framework_dist"]
    assert framework == target.variant.framework_package and lab["framework_dist"] == framework
    assert lab["dists"][framework] == base["dists"][framework] == target.variant.framework_version
    # Every installed distribution is at its constrained version, JupyterLab's included.
    off_pin = {n: (v, lab["constraints"][n]) for n, v in lab["dists"].items()
               if n in lab["constraints"] and lab["constraints"][n] != v}
    assert off_pin == {}
    assert lab["dists"]["jupyterlab"] == matrix.jupyter.jupyterlab
    # And a notebook's `pip install` cannot move the framework: pip answers with the constraint.
    code, text = lab["move_framework"]
    assert code != 0 and f"(constraint) {framework}=={target.variant.framework_version}" in text, text[-2000:]


def test_the_jupyter_layer_adds_exactly_the_jupyter_lock(probes, target):
    lock = REPO / "images" / target.variant.id / "requirements-jupyter.lock"
    pins = {re.sub(r"[-_.]+", "-", m.group(1)).lower(): m.group(2)
            for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+)", lock.read_text(), re.MULTILINE)}
    base, lab = probes["base"]["dists"], probes["jupyter"]["dists"]
    added = {n: v for n, v in lab.items() if n not in base}
    assert added == pins


def test_an_empty_jupyter_token_is_refused_in_one_line(docker, target, jupyter_image):
    code, _, err = run_once(docker, target.variant.jupyter_ref, None, network_mode="none",
                              environment={"JUPYTER_TOKEN": ""})
    assert code == 2, (code, err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "JUPYTER_TOKEN is empty" in lines[0], err[-2000:]


def image_metadata_text(docker, jupyter_image) -> tuple[str, str]:
    return (" ".join(h.get("CreatedBy", "") for h in docker.api.history(jupyter_image.id)),
            json.dumps(jupyter_image.attrs))


def test_no_token_is_baked_into_the_image(docker, jupyter_image):
    config = jupyter_image.attrs["Config"]
    names = [e.split("=", 1)[0] for e in config.get("Env") or []]
    assert "JUPYTER_TOKEN" not in names
    assert not [n for n in names if re.search(r"TOKEN|PASSWORD|SECRET", n)], names
    for text in image_metadata_text(docker, jupyter_image):
        assert not re.search(r"JUPYTER_TOKEN=[^\s\"'\\]", text)
        assert not re.search(r"(ServerApp|IdentityProvider|NotebookApp)\.(token|password)", text)


@pytest.mark.once_per_group
def test_the_running_labs_token_is_not_in_the_image(docker, jupyter_image, lab):
    for text in image_metadata_text(docker, jupyter_image):
        assert lab.token not in text
