"""`kerasenv bench --quick` for real in kerasenv:tf2.21-cpu (CPU; about 15-30 s here)."""

from __future__ import annotations

import json
import os
import struct

from .conftest import kerasenv


def test_quick_cpu_bench_writes_positive_figures_and_the_report(built_images, docker, matrix, tmp_path):
    v = matrix.get("tf2.21-cpu")
    # --precision off: without it the quick bench adds bfloat16 rows on CPUs with native
    # BF16 (AVX512-BF16/AMX), so the expected rows would depend on the CPU model.
    proc = kerasenv("bench", v.id, "--quick", "--batch-sizes", "32,128", "--precision", "off", "--gpus", "none",
                    "-o", str(tmp_path), timeout=240)
    path = tmp_path / "results" / f"bench-{v.id}-cpu.json"
    doc = json.loads(path.read_text())
    assert doc["kind"] == "kerasenv-bench" and doc["variant"] == v.id and doc["image"]["ref"] == v.image_ref
    assert doc["versions"]["tensorflow"] == v.tensorflow and doc["versions"]["keras"] == v.keras
    assert doc["device"]["kind"] == "cpu" and doc["device"]["cores"] == os.cpu_count()
    assert doc["host"]["cpu_cores"] == os.cpu_count() and doc["host"]["memory_bytes"] > 0
    assert doc["gpu_sampling"] is None
    results = doc["results"]
    assert [(r["model"], r["batch_size"]) for r in results] == [("conv", 32), ("conv", 128), ("mlp", 32), ("mlp", 128)]
    for r in results:
        assert r["status"] == "ok", r
        assert (r["jit"], r["precision"]) == ("off", "off")
        assert r["samples_per_second"] > 0 and r["time_to_first_step_s"] > 0
        assert r["timed_steps"] >= 3 and r["timed_seconds"] > 0
        # samples/s is timed steps x batch over the window the script reports
        assert abs(r["samples_per_second"] - r["timed_steps"] * r["batch_size"] / r["timed_seconds"]) < 1e-6 * r["samples_per_second"]
        start, end = r["window"]
        assert 0 < end - start < 60
    assert 0 < doc["container_wall_seconds"] < doc["wall_seconds"] < 240
    # the summary on stdout has one line per configuration
    assert len([line for line in proc.stdout.splitlines() if "samples/s" in line]) == 4

    md = (tmp_path / "report.md").read_text()
    assert f"`bench-{v.id}-cpu.json`" in md and "**No GPU was measured**" in md
    assert md.count("**not measured**") == 3
    for r in results:
        assert f"| {r['model']} | {r['batch_size']} | off | float32 | {r['samples_per_second']:,.0f} |" in md
    for name in ("throughput-conv.png", "throughput-mlp.png", "image-sizes.png"):
        data = (tmp_path / "charts" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24])[0] >= 500
    assert not (tmp_path / "charts" / "gpu-cpu-speedup.png").exists()
    # every bench container was removed
    assert docker.containers.list(all=True, filters={"label": "io.kerasenv.kind=bench"}) == []
