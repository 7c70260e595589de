"""The GPU-host check's runner (kerasenv_image.host_check): the interpreter check and the
site it unpacks from a real (small) pack, the nvidia-smi captures, the probe's weight, the
bench step (its command, its result document, GPU samples from a recorded sampling loop), the
summary and the exit status, with fake backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime

import pytest
from kerasenv_image import gpu_sampler, host_check, host_site

from ..conftest import REPO
from .test_host_site import make_wheel

TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"
QUERY = REPO / "tests" / "fixtures" / "nvidia-smi-query"


def small_pack(tmp_path, tags=(TAG,)):
    """A pack whose archive holds keras (a module that says it is the pack's) and a pure
    dependency for the given interpreters, as `kerasenv gpu-host-check --pack` writes it."""
    pack = tmp_path / "pack"
    pack.mkdir()
    closures = {}
    for tag in tags:
        d = tmp_path / "wheels" / tag
        d.mkdir(parents=True)
        closures[tag] = {"python": f"{tag[2]}.{tag[3:]}", "wheels": [
            make_wheel(d, "keras", "3.15.1", {"keras/__init__.py": b"FROM_PACK = True\n"}, top_level="keras\n",
                       requires_python=">=3.11"),
            make_wheel(d, "namex", "0.1.0", {"namex/__init__.py": b""}, top_level="namex\n"),
            make_wheel(d, "pytest", "0.0.1", {"pytest/__init__.py": b""}),  # this Python has it: not unpacked
        ]}
    host_site.build(closures, str(pack))
    return pack


def test_the_site_gets_keras_and_what_this_python_lacks_and_the_summary_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: None)
    monkeypatch.setattr(host_check, "installed_backends", lambda: ["jax", "torch"])
    results = {"jax": "PASS", "torch": "FAIL"}
    seen = {}

    def check_backend(b, args, out, env):
        site = env["PYTHONPATH"].split(":")[1]
        seen[b] = {"pythonpath": env["PYTHONPATH"].split(":")[:2], "site": site,
                   "keras": open(f"{site}/keras/__init__.py").read(), "pytest": os.path.exists(f"{site}/pytest")}
        return {"verdict": results[b], "seconds": 1.0, "probe": {"exit": 0, "judged": True},
                "smoke": {"exit": 0 if b == "jax" else 3}, "bench": {"skipped": "--no-bench"}}

    monkeypatch.setattr(host_check, "check_backend", check_backend)
    pack = small_pack(tmp_path)
    code = host_check.main(["--out", str(tmp_path / "out"), "--no-require-gpu", "--archive"], pack=str(pack))
    assert code == host_check.EXIT_FAILED
    (report,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    summary = json.loads((report / "summary.json").read_text())
    assert summary["require_gpu"] is False and summary["exit"] == 1
    assert {b: r["verdict"] for b, r in summary["backends"].items()} == results
    assert {d["name"]: d["source"] for d in summary["distributions"]} == {
        "keras": "pack", "namex": "pack", "pytest": "host"}
    assert summary["interpreter"]["tag"] == TAG and summary["pack"]["files_unpacked"] > 0
    site = seen["jax"]["site"]
    assert seen["jax"]["pythonpath"] == [str(pack), site] and f"kerasenv-host-check-{TAG}-" in site
    assert seen["jax"]["keras"] == "FROM_PACK = True\n" and not seen["jax"]["pytest"]
    assert not os.path.exists(site) and not (pack / "site").exists()  # removed: the pack stays as carried
    assert (tmp_path / "out" / f"{report.name}.tar.gz").is_file()
    assert "from the pack keras 3.15.1, namex 0.1.0; the rest from this Python" in capsys.readouterr().err
    monkeypatch.setattr(host_check, "installed_backends", lambda: [])
    assert host_check.main(["--out", str(tmp_path / "out2")], pack=str(pack)) == host_check.EXIT_NO_BACKEND


def test_an_interpreter_the_pack_does_not_hold_stops_with_one_line(tmp_path, capsys):
    other = "cp313" if TAG != "cp313" else "cp312"
    pack = small_pack(tmp_path, tags=(other,))
    code = host_check.main(["--out", str(tmp_path / "out")], pack=str(pack))
    assert code == host_check.EXIT_INTERPRETER == 3
    err = capsys.readouterr().err.strip().splitlines()
    minor = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert len(err) == 1 and err[0].startswith("kerasenv host check: this pack holds Keras 3.15.1")
    assert f"not CPython {minor}: pack for it with `kerasenv gpu-host-check --pack DIR --python-versions {minor}`" \
        in err[0]
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_a_pack_without_its_index_is_refused_in_one_line(tmp_path, capsys):
    assert host_check.main(["--out", str(tmp_path / "out")], pack=str(tmp_path)) == 3
    assert "site-packages.json is missing or unreadable" in capsys.readouterr().err


def test_nvidia_smi_outputs_are_written_verbatim_under_the_fixture_names(tmp_path, monkeypatch):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    seen = []

    def runner(cmd, **kwargs):
        seen.append(cmd[1:])
        if cmd[1:] == ["-q", "-x"]:
            return subprocess.CompletedProcess(cmd, 9, "", "Failed to initialize NVML\n")
        return subprocess.CompletedProcess(cmd, 0, f"out of {' '.join(cmd[1:])}\n", "")

    status = host_check.capture_nvidia_smi(str(tmp_path), runner=runner)
    assert ["--query-gpu=index,name,driver_version,memory.total,compute_cap", "--format=csv"] in seen
    assert (tmp_path / "list.txt").read_text() == "out of -L\n"
    assert status["nvidia-smi-q.xml"]["exit"] == 9
    assert (tmp_path / "nvidia-smi-q.xml.err").read_text() == "Failed to initialize NVML\n"
    assert not (tmp_path / "list.txt.err").exists()


def test_no_nvidia_smi_is_recorded_not_faked(tmp_path, monkeypatch):
    monkeypatch.setattr(host_check.shutil, "which", lambda name: None)
    status = host_check.capture_nvidia_smi(str(tmp_path))
    assert all(s["exit"] is None for s in status.values()) and list(tmp_path.iterdir()) == []


def test_the_probe_counts_for_a_gpu_run_and_for_a_cuda_build_only():
    cpu_jax = {"plugin": None, "failed": ["JAX's CUDA plugin: no jax-cuda12/13 plugin installed"]}
    assert host_check.probe_judged("jax", cpu_jax, require_gpu=True)
    assert not host_check.probe_judged("jax", cpu_jax, require_gpu=False)
    assert host_check.probe_judged("jax", {"plugin": "jax_cuda12_plugin"}, require_gpu=False)
    assert not host_check.probe_judged("torch", {"cuda_version": None, "import_error": None}, require_gpu=False)
    assert host_check.probe_judged("torch", {"cuda_version": "13.2"}, require_gpu=False)
    assert host_check.probe_judged("torch", {"import_error": "OSError: libcudart"}, require_gpu=False)
    assert host_check.probe_judged("jax", {}, require_gpu=False)  # no result: it crashed


def test_the_bench_protocol_is_kerasenv_benchs():
    from kerasenv.bench import throughput
    from kerasenv_image.bench.protocol import JIT_CHOICES, MODELS

    full = throughput.FULL
    assert list(host_check.BENCH["batch_sizes"]) == full["batch_sizes"] and list(host_check.BENCH["jit"]) == full["jit"]
    for key in ("warmup_steps", "min_steps", "max_steps", "time_box_s", "gpu_time_box_s"):
        assert host_check.BENCH[key] == full[key], key
    assert host_check.BENCH["models"] == MODELS and host_check.BENCH["jit"] == JIT_CHOICES


def bench_args(**kw):
    args = host_check.parse_args(["--out", "x", *kw.pop("argv", [])])
    for k, v in kw.items():
        setattr(args, k, v)
    return args


def test_the_bench_command_per_device_and_its_short_time_box():
    cpu = host_check.bench_command("cpu", bench_args())
    assert cpu[:3] == [sys.executable, "-m", "kerasenv_image.bench"]
    opts = dict(zip(cpu[3::2], cpu[4::2]))
    assert opts == {"--device": "cpu", "--models": "conv,mlp", "--batch-sizes": "32,128,512,1024", "--jit": "off,on",
                    "--precision": "auto", "--warmup-steps": "3", "--min-steps": "5", "--max-steps": "2000",
                    "--time-box": "1.5"}
    gpu = host_check.bench_command("gpu", bench_args())
    assert gpu[gpu.index("--time-box") + 1] == "3" and gpu[gpu.index("--device") + 1] == "gpu"
    short = host_check.bench_command("gpu", bench_args(argv=["--bench-time-box", "0.1", "--bench-batch-sizes", "32",
                                                              "--bench-models", "mlp"]))
    assert short[short.index("--time-box") + 1] == "0.1" and short[short.index("--batch-sizes") + 1] == "32"
    assert short[short.index("--models") + 1] == "mlp"
    with pytest.raises(SystemExit):
        host_check.parse_args(["--out", "x", "--bench-time-box", "-1"])


def recorded_samples(name: str):
    text = (QUERY / name / "output.csv").read_text(encoding="utf-8")
    query = next(a for a in (QUERY / name / "query.txt").read_text().split() if a.startswith("--query-gpu="))
    return gpu_sampler.parse_output(text, gpu_sampler.parse_fields(query)).samples


def at(stamp: str) -> float:
    return time.mktime(datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S").timetuple())


class FakeSampler:
    """Stands in for NvidiaSmiSampler: returns a recorded loop's samples on stop()."""

    made: list = []

    def __init__(self, samples, **kwargs):
        self.samples, self.kwargs, self.available, self.stderr = samples, kwargs, True, ""
        FakeSampler.made.append(self)

    def command(self):
        return ["nvidia-smi", "--query-gpu=timestamp,index,utilization.gpu", "-lms", "200"]

    def start(self):
        self.started = True

    def stop(self):
        return gpu_sampler.Parsed(samples=self.samples)


def fake_bench(results: list[dict], device: dict, code: int = 0):
    """A run_logged that writes the bench's result line, as `python -m kerasenv_image.bench` prints it."""
    from kerasenv_image.bench.protocol import RESULT_PREFIX

    calls = []

    def runner(cmd, env, stdout_path, stderr_path, timeout):
        calls.append(cmd)
        doc = {"schema": 1, "kind": "kerasenv-bench-container", "versions": {"jax": "0.10.2", "keras": "3.15.1"},
               "device": device, "settings": {"precisions": ["off", "bfloat16"], "precisions_skipped": {
                   "float16": "needs compute capability >= 7.0"}, "jit_skipped": {}},
               "models": {"conv": "..."}, "results": [dict(r) for r in results], "wall_seconds": 9.0}
        with open(stdout_path, "w") as f:
            f.write("noise\n" + RESULT_PREFIX + json.dumps(doc) + "\n")
        with open(stderr_path, "w") as f:
            f.write("[bench] ...\n")
        return code, 9.5

    return runner, calls


def test_a_gpu_bench_gets_the_steady_state_utilisation_of_its_windows(tmp_path):
    samples = recorded_samples("a5000-train-steady")  # recorded on GPU 0 of an RTX A5000
    results = [{"model": "conv", "batch_size": 512, "jit": "on", "precision": "bfloat16", "status": "ok",
                "samples_per_second": 41234.5, "time_to_first_step_s": 3.21,
                "window": [at("2025/05/25 00:08:11"), at("2025/05/25 00:08:20")]},
               {"model": "conv", "batch_size": 1024, "jit": "on", "precision": "bfloat16", "status": "failed",
                "failure": "oom", "reason": "out of memory: RESOURCE_EXHAUSTED"}]
    runner, calls = fake_bench(results, {"kind": "gpu", "name": "NVIDIA RTX A5000", "compute_capability": "8.6"})
    FakeSampler.made = []
    summary = host_check.run_bench("jax", "gpu", bench_args(), str(tmp_path), {}, runner=runner,
                                   sampler_factory=lambda **kw: FakeSampler(samples, **kw))
    assert FakeSampler.made[0].kwargs == {"indexes": [0]} and calls[0][calls[0].index("--device") + 1] == "gpu"
    doc = json.loads((tmp_path / "bench" / "results" / "bench-host-jax-gpu.json").read_text())
    assert doc["kind"] == "kerasenv-bench" and doc["variant"] == "host-jax" and doc["device"]["id"] == "gpu0"
    expected = gpu_sampler.steady_state(samples, *results[0]["window"], index=0)
    assert doc["results"][0]["gpu"] == expected and 85 <= expected["utilization_gpu_mean"] <= 100
    assert summary["configurations"] == 2 and summary["ok"] == 1 and summary["exit"] == 0
    assert summary["failed"] == ["conv batch 1024 jit on bfloat16: out of memory: RESOURCE_EXHAUSTED"]
    assert summary["precisions_skipped"] == {"float16": "needs compute capability >= 7.0"}
    row = summary["rows"][0]
    assert (row["samples_per_second"], row["gpu_utilization_percent"]) == (41234.5, expected["utilization_gpu_mean"])
    # kerasenv bench-report reads it as one of its own results
    from kerasenv.bench import report

    docs, problems = report.load_results(tmp_path / "bench" / "results")
    assert problems == [] and report.rows(docs)[0]["gpu_util"] == expected["utilization_gpu_mean"]


def test_a_mig_slice_named_by_uuid_is_sampled_whole_and_not_attributed_across_gpus(tmp_path):
    # The UUID of a MIG device in a recorded `nvidia-smi -L` (tests/fixtures/nvidia-smi/mig-a100-80gb-list).
    listing = (REPO / "tests" / "fixtures" / "nvidia-smi" / "mig-a100-80gb-list" / "list.txt").read_text()
    mig = listing.split("(UUID: ")[2].split(")")[0]
    assert mig.startswith("MIG-")
    two_gpus = [gpu_sampler.Sample(time=at("2025/05/25 00:08:12") + i, index=i % 2, utilization_gpu=None,
                                   memory_used_mib=50.0, memory_total_mib=40960.0) for i in range(8)]
    results = [{"model": "mlp", "batch_size": 32, "jit": "off", "precision": "off", "status": "ok",
                "samples_per_second": 100.0, "time_to_first_step_s": 1.0,
                "window": [at("2025/05/25 00:08:11"), at("2025/05/25 00:08:20")]}]
    runner, _ = fake_bench(results, {"kind": "gpu", "name": "NVIDIA A100 80GB PCIe MIG 3g.40gb"})
    FakeSampler.made = []
    summary = host_check.run_bench("torch", "gpu", bench_args(), str(tmp_path), {"CUDA_VISIBLE_DEVICES": mig},
                                   runner=runner, sampler_factory=lambda **kw: FakeSampler(two_gpus, **kw))
    assert FakeSampler.made[0].kwargs == {"indexes": None}  # every GPU: the slice has no index
    assert summary["gpu_sampling_note"].startswith("GPU utilisation not attributed")
    assert summary["rows"][0]["gpu_utilization_percent"] is None
    one_gpu = [s for s in two_gpus if s.index == 0]  # one physical GPU: its rows are the slice's card
    summary = host_check.run_bench("torch", "gpu", bench_args(), str(tmp_path), {"CUDA_VISIBLE_DEVICES": mig},
                                   runner=runner, sampler_factory=lambda **kw: FakeSampler(one_gpu, **kw))
    doc = json.loads((tmp_path / "bench" / "results" / "bench-host-torch-gpu.json").read_text())
    gpu = doc["results"][0]["gpu"]
    assert gpu["utilization_gpu_mean"] is None and gpu["memory_used_mib_max"] == 50.0  # [N/A]: missing, not 0
    assert "N/A in every sample" in gpu["note"] and summary["gpu_sampling_note"] is None


def test_a_bench_without_its_result_line_is_an_error(tmp_path):
    def runner(cmd, env, stdout_path, stderr_path, timeout):
        open(stdout_path, "w").close()
        open(stderr_path, "w").close()
        return 124, 30.0

    summary = host_check.run_bench("jax", "cpu", bench_args(), str(tmp_path), {}, runner=runner)
    assert summary["exit"] == 124 and "without a result line" in summary["error"]


def test_check_backend_runs_probe_smoke_and_the_bench_on_each_device(tmp_path, monkeypatch):
    ran = []

    def run_logged(cmd, env, stdout_path, stderr_path, timeout):
        module = cmd[2]
        ran.append((module, env["KERAS_BACKEND"], cmd[cmd.index("--device") + 1] if "--device" in cmd else None))
        with open(stdout_path, "w") as f:
            if module.endswith("gpu_libraries"):  # a CPU-only jaxlib on a GPU-less machine
                f.write(json.dumps({"plugin": None, "failed": ["JAX's CUDA plugin: none"], "gpus": []}) + "\n")
        return (1 if module.endswith("gpu_libraries") else 0), 1.0

    monkeypatch.setattr(host_check, "run_logged", run_logged)
    monkeypatch.setattr(host_check, "run_bench", lambda backend, device, args, out, env: (
        ran.append(("bench", env["KERAS_BACKEND"], device)) or {"exit": 0, "seconds": 2.0, "ok": 4,
                                                                 "configurations": 4}))
    result = host_check.check_backend("jax", bench_args(require_gpu=False), str(tmp_path), {})
    assert result["verdict"] == "PASS" and result["probe"]["judged"] is False and list(result["bench"]) == ["cpu"]
    assert [r[0] for r in ran] == ["kerasenv_image.probes.gpu_libraries", "kerasenv_image.smoke", "bench"]
    assert result["seconds"] == 4.0
    ran.clear()
    result = host_check.check_backend("jax", bench_args(require_gpu=True), str(tmp_path), {})
    assert result["verdict"] == "FAIL" and result["bench"] == {"skipped": "the probe or the smoke training failed"}
    result = host_check.check_backend("jax", bench_args(argv=["--no-bench", "--no-require-gpu"]), str(tmp_path), {})
    assert result["verdict"] == "PASS" and result["bench"] == {"skipped": "--no-bench"}


def test_the_bench_table_leaves_a_missing_reading_blank_not_zero():
    rows = host_check.bench_rows("jax", "gpu", "NVIDIA H200", [
        {"model": "conv", "batch_size": 512, "jit": "on", "precision": "bfloat16", "status": "ok",
         "samples_per_second": 98765.4, "time_to_first_step_s": 4.567, "gpu": {"utilization_gpu_mean": None}},
        {"model": "mlp", "batch_size": 32, "jit": "off", "precision": "off", "status": "ok",
         "samples_per_second": 1000.0, "time_to_first_step_s": 0.5, "gpu": {"utilization_gpu_mean": 97.4}},
        {"model": "conv", "batch_size": 1024, "jit": "on", "precision": "float16", "status": "failed",
         "reason": "out of memory: x"}])
    summary = {"host": "h", "date": "d", "python": "3.12.1",
               "backends": {"jax": {"versions": {"jax": "0.10.2", "keras": "3.15.1", "backend": "jax"}}}}
    table = host_check.bench_table(rows, summary)
    assert "jax 0.10.2, keras 3.15.1\n" in table and "backend jax" not in table
    assert "| jax | gpu (NVIDIA H200) | conv | 512 | on | mixed bfloat16 | 98765 | 4.57 | - | ok |" in table
    assert "| jax | gpu (NVIDIA H200) | mlp | 32 | off | float32 | 1000 | 0.50 | 97% | ok |" in table
    assert "| - | - | - | failed: out of memory: x |" in table


def test_the_runner_and_its_pack_module_are_standard_library_only():
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import kerasenv_image.host_check, kerasenv_image.host_site; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('kerasenv', 'numpy', 'keras', 'jax', "
            "'torch', 'tensorflow')); assert not bad, bad")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(REPO / "images" / "common")], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
