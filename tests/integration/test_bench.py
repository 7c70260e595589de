"""`kerasenv bench --quick` for real in kerasenv:tf2.21-cpu (CPU; about 15-30 s here, twice
that on a CPU with native bfloat16, which adds its rows)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from .conftest import kerasenv


def native_bf16_cpu() -> bool:
    """Whether this CPU has native bfloat16 math (AMX-BF16 or AVX512-BF16), read here from
    /proc/cpuinfo on its own rather than with the bench script's parser, so a wrong
    detection in the script fails the test. A container reads the host's /proc/cpuinfo."""
    flags: set[str] = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags.update(value.split())
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def test_quick_cpu_bench_writes_positive_figures_and_the_report(built_images, docker, matrix, tmp_path):
    v = matrix.get("tf2.21-cpu")
    # The default precision choice ("auto"), so the test covers it: float32 always, bfloat16
    # only on a CPU with native bfloat16. The expected rows follow from this machine's CPU
    # (this test once assumed none and failed on AVX512-BF16 hosts).
    bf16 = native_bf16_cpu()
    precisions = ["off", "bfloat16"] if bf16 else ["off"]
    proc = kerasenv("bench", v.id, "--quick", "--batch-sizes", "32,128", "--gpus", "none",
                    "-o", str(tmp_path), timeout=240)
    path = tmp_path / "results" / f"bench-{v.id}-cpu.json"
    doc = json.loads(path.read_text())
    assert doc["kind"] == "kerasenv-bench" and doc["variant"] == v.id and doc["image"]["ref"] == v.image_ref
    assert doc["versions"]["tensorflow"] == v.tensorflow and doc["versions"]["keras"] == v.keras
    assert doc["device"]["kind"] == "cpu" and doc["device"]["cores"] == os.cpu_count()
    assert doc["host"]["cpu_cores"] == os.cpu_count() and doc["host"]["memory_bytes"] > 0
    assert doc["gpu_sampling"] is None
    chosen = doc["settings"]["container"]
    assert chosen["precisions"] == precisions
    # the precision left out is named with its reason, never dropped silently
    assert set(chosen["precisions_skipped"]) == ({"float16"} if bf16 else {"bfloat16"})
    results = doc["results"]
    assert [(r["model"], r["precision"], r["batch_size"]) for r in results] == [
        (model, precision, batch) for model in ("conv", "mlp") for precision in precisions for batch in (32, 128)]
    for r in results:
        assert r["status"] == "ok", r
        assert r["jit"] == "off"
        assert r["policy"] == {"off": "float32", "bfloat16": "mixed_bfloat16"}[r["precision"]]
        assert r["samples_per_second"] > 0 and r["time_to_first_step_s"] > 0
        assert r["timed_steps"] >= 3 and r["timed_seconds"] > 0
        # samples/s is timed steps x batch over the window the script reports
        assert abs(r["samples_per_second"] - r["timed_steps"] * r["batch_size"] / r["timed_seconds"]) < 1e-6 * r["samples_per_second"]
        start, end = r["window"]
        assert 0 < end - start < 60
    assert 0 < doc["container_wall_seconds"] < doc["wall_seconds"] < 240
    # the summary on stdout has one line per configuration
    assert len([line for line in proc.stdout.splitlines() if "samples/s" in line]) == len(results)

    md = (tmp_path / "report.md").read_text()
    assert f"`bench-{v.id}-cpu.json`" in md and "**No GPU was measured**" in md
    assert md.count("**not measured**") == 3
    for r in results:
        shown = "float32" if r["precision"] == "off" else f"mixed {r['precision']}"
        assert f"| {r['model']} | {r['batch_size']} | off | {shown} | {r['samples_per_second']:,.0f} |" in md
    # the mixed-precision section has figures (and its chart) exactly when bfloat16 ran
    assert ("Not measured: every result here is float32." in md) is not bf16
    charts = ["throughput-conv.png", "throughput-mlp.png", "image-sizes.png"]
    charts += ["mixed-precision-speedup.png"] if bf16 else []
    for name in charts:
        data = (tmp_path / "charts" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] >= 500
    assert (tmp_path / "charts" / "mixed-precision-speedup.png").exists() is bf16
    assert not (tmp_path / "charts" / "gpu-cpu-speedup.png").exists()
    # every bench container was removed
    assert docker.containers.list(all=True, filters={"label": "io.kerasenv.kind=bench"}) == []
