"""The benchmark report (report.md + charts/*.png) from small result files.

The CPU figures below are the shape of a real `kerasenv bench` result; the GPU figures are
test inputs for the speedup and target arithmetic (never written under benchmarks/), and
the GPU utilisation in them comes from a recorded nvidia-smi loop."""

from __future__ import annotations

import json
import struct
import time
from datetime import datetime

import pytest

from kerasenv.bench import report as bench_report
from kerasenv_image import gpu_sampler

from ...conftest import REPO

HOST = {"cpu_model": "AMD EPYC", "cpu_cores": 2, "memory_bytes": 24 * 2**30, "gpus": []}


def doc(device: dict, results: list[dict], variant="tf2.21-cpu", host=HOST) -> dict:
    return {"schema": 1, "kind": "kerasenv-bench", "created_at": "2026-11-29T18:00:00Z", "host": host,
            "variant": variant, "image": {"ref": f"kerasenv:{variant}"},
            "versions": {"tensorflow": "2.21.0", "keras": "3.15.1"}, "device": device,
            "models": {"conv": "Keras MNIST conv net", "mlp": "MNIST MLP"}, "results": results, "wall_seconds": 95.0}


def ok(model, batch, sps, jit="off", precision="off", ttfs=1.0, gpu=None):
    r = {"model": model, "batch_size": batch, "jit": jit, "precision": precision, "status": "ok",
         "samples_per_second": sps, "time_to_first_step_s": ttfs, "timed_steps": 5, "timed_seconds": 1.0}
    if gpu:
        r["gpu"] = gpu
    return r


CPU = {"id": "cpu", "kind": "cpu", "name": "AMD EPYC", "cores": 2}
CPU_RESULTS = [ok("conv", 32, 2103), ok("conv", 1024, 2600, ttfs=1.4), ok("conv", 1024, 730, jit="on", ttfs=4.2),
               ok("mlp", 32, 3977), ok("mlp", 1024, 16468),
               {"model": "mlp", "batch_size": 65536, "jit": "off", "precision": "off", "status": "failed",
                "failure": "oom", "reason": "out of memory: MemoryError"}]


def write(root, name, data):
    (root / "results").mkdir(parents=True, exist_ok=True)
    (root / "results" / name).write_text(json.dumps(data))


def assert_real_png(path, min_width=500):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= min_width and height >= 300
    assert len(data) > 15_000
    import matplotlib.image

    pixels = matplotlib.image.imread(str(path))[..., :3]
    ink = (pixels < 0.9).any(axis=-1).mean()
    assert 0.02 < ink < 0.7, f"{path.name}: {ink:.1%} of the pixels are drawn"
    colours = {tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3)}
    assert len(colours) > 10


def test_cpu_only_report_says_gpu_not_measured_and_draws_no_gpu_chart(tmp_path):
    write(tmp_path, "bench-tf2.21-cpu-cpu.json", doc(CPU, CPU_RESULTS))
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "gpu-cpu-speedup.png").write_bytes(b"stale chart of an older run")
    written = bench_report.generate(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "**No GPU was measured**" in md and "without an NVIDIA GPU" in md
    assert md.count("**not measured**") == 3
    assert "| CPU AMD EPYC (2 cores) | conv | 1024 | off | float32 | 2,600 | 1.40 s | n/a (CPU) | - | ok |" in md
    assert "| CPU AMD EPYC (2 cores) | conv | 1024 | on | float32 | 730 | 4.20 s |" in md
    assert "| mlp | 65536 | off | float32 | - | - s | n/a (CPU) | - | FAILED: out of memory: MemoryError |" in md
    assert "## GPU vs CPU speedup\n\nNot measured" in md
    assert "## Mixed-precision speedup\n\nNot measured" in md
    assert not (tmp_path / "charts" / "gpu-cpu-speedup.png").exists()  # the stale one is gone
    assert not (tmp_path / "charts" / "mixed-precision-speedup.png").exists()
    assert set(written) == {"report", "throughput-conv.png", "throughput-mlp.png", "image-sizes.png"}
    for name in ("throughput-conv.png", "throughput-mlp.png", "image-sizes.png"):
        assert_real_png(tmp_path / "charts" / name)
    assert "![conv: samples/s by batch size](charts/throughput-conv.png)" in md


def test_anchor_sizes_and_their_sources_are_in_the_report(tmp_path):
    write(tmp_path, "bench-tf2.21-cpu-cpu.json", doc(CPU, CPU_RESULTS[:1]))
    sizes = {"kind": "kerasenv-sizes", "created_at": "2026-11-29T18:20:46Z",
             "images": [{"id": "tf2.21-cpu", "ref": "kerasenv:tf2.21-cpu", "total_bytes": 1540781840,
                         "budget_bytes": 1700000000, "within_budget": True,
                         "parts": {"base": 74830242, "python": 126607968, "framework": 1339295127, "kerasenv": 48503}},
                        {"id": "tf2.21-cuda12.9", "ref": "kerasenv:tf2.21-cuda12.9", "total_bytes": 5400000000,
                         "budget_bytes": 5300000000, "within_budget": False, "parts": {"cuda": 2993000000}}],
             "shared": [{"a": "tf2.21-cuda12.9", "b": "tf2.20-cuda12.5", "bytes": 3190000000}]}
    write(tmp_path, "sizes.json", sizes)
    bench_report.generate(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| `kerasenv:tf2.21-cpu` | 1.54 GB | 1.70 GB | yes | 75 MB | 127 MB | - | 1,339 MB | 0.05 MB |" in md
    assert "| `kerasenv:tf2.21-cuda12.9` | 5.40 GB | 5.30 GB | **no** |" in md
    assert "`tf2.21-cuda12.9` and `tf2.20-cuda12.5`: 3.19 GB" in md
    assert "https://github.com/tensorflow/tensorflow/pull/59682" in md
    assert "| tensorflow/tensorflow GPU (official) | 6.52-6.63 GB (about 6.6 GB) |" in md
    assert "| tensorflow/tensorflow CPU (official) | 1.76-2.10 GB (about 2.1 GB) |" in md
    assert "| AWS Deep Learning Container, TF GPU (EC2, TF 2.18) | 9.3 GB |" in md and "9,307 MB" in md
    assert_real_png(tmp_path / "charts" / "image-sizes.png")
    # the anchors are the ones the project's shared reference gives
    anchors = (REPO.parent / "shared" / "reference" / "anchors.md")
    if anchors.exists():
        text = anchors.read_text()
        assert "6.63 → 6.52 GB" in text and "2.07 → 1.76 GB" in text and "9,307 MB" in text


def _recorded_gpu_util() -> dict:
    """Steady-state utilisation from the recorded RTX A5000 loop (tests/fixtures/nvidia-smi-query)."""
    folder = REPO / "tests" / "fixtures" / "nvidia-smi-query" / "a5000-train-steady"
    fields = gpu_sampler.parse_fields((folder / "query.txt").read_text().split()[1])
    samples = gpu_sampler.parse_output((folder / "output.csv").read_text(), fields).samples
    at = lambda s: time.mktime(datetime.strptime(s, "%Y/%m/%d %H:%M:%S").timetuple())
    return gpu_sampler.steady_state(samples, at("2025/05/25 00:08:11"), at("2025/05/25 00:08:21"))


def test_gpu_results_give_speedups_charts_and_target_verdicts(tmp_path):
    util = _recorded_gpu_util()  # 97.3 % mean
    gpu_host = {**HOST, "gpus": [{"index": 0, "name": "NVIDIA RTX A5000", "compute_capability": "8.6"}]}
    gpu = {"id": "gpu0", "kind": "gpu", "name": "NVIDIA RTX A5000", "compute_capability": "8.6", "host_index": 0}
    write(tmp_path, "bench-tf2.21-cuda12.9-cpu.json", doc(CPU, CPU_RESULTS, "tf2.21-cuda12.9", gpu_host))
    write(tmp_path, "bench-tf2.21-cuda12.9-gpu0.json", doc(gpu, [
        ok("conv", 32, 9000, gpu={"utilization_gpu_mean": 40.0, "samples": 5}),
        ok("conv", 1024, 39000, gpu=util), ok("conv", 1024, 30000, jit="on", gpu=util),
        ok("conv", 1024, 70200, precision="float16", gpu=util), ok("conv", 1024, 50000, precision="bfloat16", gpu=util),
    ], "tf2.21-cuda12.9", gpu_host))
    written = bench_report.generate(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "No GPU was measured" not in md
    verdicts = {t["target"].split(",")[0].split(" >=")[0]: t for t in bench_report.targets(bench_report.rows(
        bench_report.load_results(tmp_path / "results")[0]))}
    speed = verdicts["GPU vs CPU speedup"]
    assert speed["status"] == "met" and speed["value"].startswith("15.0x")  # 39000 / 2600, both float32
    mixed = verdicts["mixed-precision speedup on tensor-core GPUs"]
    assert mixed["status"] == "met" and mixed["value"].startswith("1.80x")  # 70200 / 39000, jit off
    utilisation = verdicts["steady-state GPU utilisation at the largest batch"]
    assert utilisation["status"] == "met" and "97%" in utilisation["value"] and "9 samples" in utilisation["value"]
    assert "| conv | 1024 | 39,000 | 2,600 | 15.0x |" in md
    assert "| conv | 32 | 9,000 | 2,103 | 4.3x |" in md
    assert "| 1024 | off | bfloat16 | 50,000 | 39,000 | 1.28x |" in md
    assert "| GPU0 NVIDIA RTX A5000 (cc 8.6) | conv | 1024 | off | mixed float16 | 70,200 | 1.00 s | 97% | 13067 MiB | ok |" in md
    for name in ("gpu-cpu-speedup.png", "mixed-precision-speedup.png", "throughput-conv.png"):
        assert name in written
        assert_real_png(tmp_path / "charts" / name)


def test_targets_not_met_are_reported_as_such(tmp_path):
    gpu = {"id": "gpu0", "kind": "gpu", "name": "Tesla P100", "compute_capability": "6.0"}
    write(tmp_path, "bench-a-cpu.json", doc(CPU, [ok("conv", 1024, 2600)], "a"))
    write(tmp_path, "bench-a-gpu0.json", doc(gpu, [ok("conv", 1024, 13000, gpu={"utilization_gpu_mean": 61.0,
                                                                                  "samples": 12})], "a"))
    rs = bench_report.rows(bench_report.load_results(tmp_path / "results")[0])
    by = {t["target"][:12]: t for t in bench_report.targets(rs)}
    assert by["GPU vs CPU s"]["status"] == "not met" and by["GPU vs CPU s"]["value"].startswith("5.0x")
    assert by["mixed-precis"]["status"] == "not measured"  # no float16 on a GPU with tensor cores
    assert by["steady-state"]["status"] == "not met" and "61%" in by["steady-state"]["value"]


def test_unreadable_or_foreign_files_are_named_not_fatal(tmp_path):
    write(tmp_path, "bench-ok-cpu.json", doc(CPU, CPU_RESULTS[:1]))
    (tmp_path / "results" / "bench-broken-cpu.json").write_text("{half a file")
    write(tmp_path, "bench-other.json", {"kind": "something-else"})
    bench_report.generate(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "bench-broken-cpu.json: unreadable" in md and "bench-other.json: not a kerasenv bench result" in md
    assert "from 1 result file(s)" in md


@pytest.mark.parametrize("precision", ["bfloat16"])
def test_cpu_mixed_precision_is_shown_but_the_gpu_target_stays_unmeasured(tmp_path, precision):
    write(tmp_path, "bench-tf2.21-cpu-cpu.json", doc(CPU, [ok("mlp", 256, 10000), ok("mlp", 256, 6000, precision=precision)]))
    bench_report.generate(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| CPU AMD EPYC (2 cores) | mlp | 256 | off | bfloat16 | 6,000 | 10,000 | 0.60x |" in md
    assert "CPU figures only" in md and md.count("**not measured**") == 3
    assert_real_png(tmp_path / "charts" / "mixed-precision-speedup.png")


def test_precisions_left_out_are_listed_with_their_reason(tmp_path):
    cpu_doc = doc(CPU, CPU_RESULTS)
    cpu_doc["settings"] = {"container": {"precisions_skipped": {"bfloat16": "this CPU has no native bfloat16 math"}}}
    write(tmp_path, "bench-tf2.21-cpu-cpu.json", cpu_doc)
    bench_report.generate(tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "- CPU AMD EPYC: bfloat16: this CPU has no native bfloat16 math" in text
