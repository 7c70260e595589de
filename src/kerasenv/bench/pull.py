"""`kerasenv bench-pull`: what a new cloud GPU instance waits for before it trains: the pull
of an image, gzip against zstd, into an empty engine, and the first run of its default
command (the smoke training) to its first step and verdict.

For each compression the image goes from this host's Docker engine to a throwaway registry
on 127.0.0.1 (gzip: `docker push`, as `kerasenv push` writes it; zstd: skopeo at the chosen
level). Each pull then goes into a throwaway containerd of its own (engine/containerd.py:
own root, no network, removed after), so every pull is cold and nothing of the host's
engine is touched but the read of the image. The registry is on loopback: the figures are
decompression and disk, not a network. Everything is removed at the end, also on Ctrl-C.
"""

from __future__ import annotations

import platform as platform_mod
import re
import statistics
import subprocess
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..engine import containerd as containerd_mod
from ..images.sizes import unpacked_bytes  # attrs["Size"] is compressed on the containerd store
from ..errors import KerasenvError, UsageError
from ..matrix.schema import Variant
from ..publish import compression as compression_mod
from ..publish import local_registry

KIND = "kerasenv-pull-bench"
_FIRST_STEP = re.compile(r"first step after ([0-9.]+) s")
_VERDICT = re.compile(r"^\[smoke\] (OK|FAIL[^\n]*|[A-Z][A-Z ]+\(exit \d+\))", re.M)


@dataclass
class PullRun:
    compression: str
    round: int
    pull_s: float  # `ctr image pull`: fetch and unpack into the snapshotter
    first_run_s: float  # `ctr run` of the default command, start to exit
    first_step_s: float | None  # the smoke's own time to its first training step
    verdict: str
    snapshots: int  # the image's unpacked layers


def parse_compressions(text: str) -> list[str]:
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in chosen if c not in (compression_mod.GZIP, compression_mod.ZSTD)]
    if bad or not chosen or len(set(chosen)) != len(chosen):
        raise UsageError(f"--compression {text!r}: a list of gzip and zstd, each once (e.g. gzip,zstd)")
    return chosen


def smoke_outcome(output: str) -> tuple[float | None, str]:
    """(first step seconds, verdict) from the smoke's console output."""
    step = _FIRST_STEP.search(output)
    verdict = _VERDICT.search(output)
    return (float(step.group(1)) if step else None), (verdict.group(1) if verdict else "no verdict")


def _push_gzip(client, image_ref: str, dest: str) -> float:
    """`docker push`, through this host's engine: the gzip layers every engine takes."""
    from ..publish import registry

    repo, tag = dest.rsplit(":", 1)
    image = client.images.get(image_ref)
    image.tag(repo, tag)
    try:
        started = time.perf_counter()
        registry._transfer(lambda: client.images.push(repo, tag=tag, stream=True, decode=True), lambda m: None,
                           f"push {dest}")
        return time.perf_counter() - started
    except registry._RegistryFailure as exc:
        raise KerasenvError(f"push {dest} failed: {exc.detail.splitlines()[0][:300]}") from None
    finally:
        client.images.remove(dest)  # the tag only; the image stays


def dry_run(client, v: Variant, compressions: list[str], zstd_level: int, work_dir: Path | None, say,
            image_ref: str | None = None) -> list[str]:
    """Everything a measurement needs, checked, and the throwaway registry and containerd
    started and removed, without pushing or pulling: the plan, one line per step."""
    from docker.errors import ImageNotFound

    image_ref = image_ref or v.image_ref
    containerd_mod.preflight()
    if compression_mod.ZSTD in compressions:
        compression_mod.preflight(compression_mod.ZSTD)
    try:
        size = unpacked_bytes(client.images.get(image_ref))
    except ImageNotFound:
        raise UsageError(f"{image_ref} is not here: run `make build VARIANT={v.id}` first") from None
    plan = []
    with local_registry.running(work_dir) as reg:
        with containerd_mod.running(work_dir) as engine:
            version = engine.ctr("version").stdout.split("Version:")[-1].split()[0]
            for c in compressions:
                how = (f"skopeo, zstd level {zstd_level}" if c == compression_mod.ZSTD else "docker push, gzip")
                plan.append(f"would push {image_ref} ({size / 1e9:.2f} GB) to {reg.address} with {how}, then pull "
                            f"it into an empty containerd {version} and run its default command")
    return plan


def measure(client, v: Variant, compressions: list[str], rounds: int, zstd_level: int, work_dir: Path | None,
            say, image_ref: str | None = None, platform: str | None = None) -> dict:
    """image_ref: another local image to measure in the variant's place (an experimental
    build of it, say); default the variant's own image. platform: pull (and run) that platform's
    image (linux/arm64 on an amd64 host: its default command runs under qemu-user)."""
    image_ref = image_ref or v.image_ref
    containerd_mod.preflight()
    if compression_mod.ZSTD in compressions:
        compression_mod.preflight(compression_mod.ZSTD)
    from docker.errors import ImageNotFound

    try:
        image = client.images.get(image_ref)
    except ImageNotFound:
        raise UsageError(f"{image_ref} is not here: run `make build VARIANT={v.id}` first") from None
    images: dict[str, dict] = {}
    runs: list[PullRun] = []
    with local_registry.running(work_dir) as reg:
        repo = f"{reg.address}/kerasenv"
        for c in compressions:
            tag = compression_mod.zstd_tag(v.id) if c == compression_mod.ZSTD else v.id
            ref = f"{repo}:{tag}"
            say(f"kerasenv: pushing {ref} ({c}{f' level {zstd_level}' if c == compression_mod.ZSTD else ''})")
            push_s = (compression_mod.push_zstd(image_ref, ref, zstd_level) if c == compression_mod.ZSTD
                      else _push_gzip(client, image_ref, ref))
            manifest = reg.manifest("kerasenv", tag)
            images[c] = {"ref": ref, "push_s": round(push_s, 1), "compressed_bytes": local_registry.layer_bytes(manifest),
                         "layers": len(manifest["layers"]),
                         "largest_layer_bytes": max(layer["size"] for layer in manifest["layers"]),
                         "media_types": sorted(local_registry.layer_media_types(manifest))}
        for r in range(1, rounds + 1):
            for c in compressions:
                ref = images[c]["ref"]
                with containerd_mod.running(work_dir) as engine:
                    say(f"kerasenv: round {r}: pulling {ref} into an empty containerd")
                    pull_s = engine.pull(ref, platform=platform)
                    snapshots = engine.snapshot_count()
                    started = time.perf_counter()
                    proc = engine.run(ref, f"kerasenv-bench-pull-{r}-{c}", platform=platform)
                    first_run_s = time.perf_counter() - started
                output = proc.stdout + proc.stderr
                first_step_s, verdict = smoke_outcome(output)
                if proc.returncode != 0:
                    tail = output.strip().splitlines()[-1:] or ["no output"]
                    raise KerasenvError(f"the default command of {ref} exited {proc.returncode} under containerd: "
                                        f"{tail[0][:200]}")
                run = PullRun(c, r, round(pull_s, 1), round(first_run_s, 1), first_step_s, verdict, snapshots)
                say(f"kerasenv:   {c}: pull {run.pull_s:.1f} s, default command {run.first_run_s:.1f} s "
                    f"(first step after {first_step_s} s), {verdict}")
                runs.append(run)
    doc = document(v, image_ref, image, images, runs, zstd_level)
    doc["platform"] = platform or f"linux/{image.attrs.get('Architecture', 'amd64')}"
    if platform and platform.split("/")[1] != {"x86_64": "amd64", "aarch64": "arm64"}.get(machine(), machine()):
        doc["emulated"] = (f"the default command ran under qemu-user on this {machine()} host: its times are the "
                           "emulator's, not an arm64 host's; the pull (fetch, decompress, unpack) is this host's")
    return doc


def machine() -> str:
    return platform_mod.machine()


def engine_name() -> str:
    proc = subprocess.run(["containerd", "--version"], capture_output=True, text=True)
    parts = proc.stdout.split()
    return f"containerd {parts[2] if len(parts) > 2 else '?'} (a throwaway one, overlayfs snapshotter)"


def document(v: Variant, image_ref: str, image, images: dict, runs: list[PullRun], zstd_level: int) -> dict:
    summary = {}
    for c in images:
        mine = [r for r in runs if r.compression == c]
        steps = [r.first_step_s for r in mine if r.first_step_s is not None]
        summary[c] = {"pull_s": statistics.median(r.pull_s for r in mine),
                      "first_run_s": statistics.median(r.first_run_s for r in mine),
                      "first_step_s": statistics.median(steps) if steps else None,
                      "compressed_bytes": images[c]["compressed_bytes"], "push_s": images[c]["push_s"]}
    ratio = None
    if {compression_mod.GZIP, compression_mod.ZSTD} <= summary.keys():
        ratio = {key: round(summary["zstd"][key] / summary["gzip"][key], 3)
                 for key in ("pull_s", "compressed_bytes") if summary["gzip"][key]}
    return {"kind": KIND, "variant": v.id, "image": image_ref, "image_id": image.id,
            "uncompressed_bytes": unpacked_bytes(image),
            "created_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "engine": engine_name(), "registry": "Debian's docker-registry on 127.0.0.1 (loopback: no network)",
            "host": {"cpus": _cpus(), "machine": platform_mod.machine()}, "zstd_level": zstd_level,
            "images": images, "runs": [asdict(r) for r in runs], "median": summary, "zstd_vs_gzip": ratio}


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


def summary_lines(doc: dict) -> list[str]:
    lines = []
    for c, s in doc["median"].items():
        lines.append(f"{doc['image']} {c}: {s['compressed_bytes'] / 1e9:.2f} GB compressed (push {s['push_s']:.0f} s), "
                     f"cold pull {s['pull_s']:.1f} s, default command {s['first_run_s']:.1f} s "
                     f"(first step after {s['first_step_s']} s)")
    if doc.get("zstd_vs_gzip"):
        r = doc["zstd_vs_gzip"]
        lines.append(f"zstd / gzip: pull {r.get('pull_s')}x, bytes {r.get('compressed_bytes')}x ({doc['engine']})")
    return lines
