"""`kerasenv bench` on the host, without Docker: inputs, device planning from recorded
nvidia-smi outputs, and the GPU path (sampler + steady-state attribution) with a stand-in
for the container and a replay of a recorded `nvidia-smi --query-gpu` loop."""

from __future__ import annotations

import json
import time
from datetime import datetime

import pytest

from kerasenv.bench import throughput as bench
from kerasenv import cli
from kerasenv.host import doctor
from kerasenv.errors import KerasenvError, UsageError
from kerasenv_image import gpu_sampler

from ...conftest import REPO

FAKE_SMI = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")
FAKE_LOOP = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi-loop")


def host_gpus(monkeypatch, scenario: str):
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", scenario)
    return doctor.probe_nvidia(FAKE_SMI)


# --- inputs ------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    (dict(models="conv,resnet"), "'resnet'"),
    (dict(models=""), "--models"),
    (dict(batch_sizes="32,big"), "--batch-sizes"),
    (dict(batch_sizes="0"), "from 1 to 65536"),
    (dict(batch_sizes="-32"), "--batch-sizes"),
    (dict(jit="yes"), "--jit"),
    (dict(precision="fp8"), "'fp8'"),
])
def test_bad_settings_are_usage_errors(kwargs, message):
    args = dict(models=None, batch_sizes=None, jit=None, precision=None, quick=False) | kwargs
    with pytest.raises(UsageError, match=message) as exc:
        bench.settings_from(**args)
    assert exc.value.exit_code == 2


def test_default_and_quick_settings():
    full = bench.settings_from(models=None, batch_sizes=None, jit=None, precision=None, quick=False)
    assert (full.models, full.batch_sizes, full.jit, full.precision) == (["conv", "mlp"], [32, 128, 512, 1024],
                                                                          ["off", "on"], "auto")
    quick = bench.settings_from(models="mlp", batch_sizes=None, jit=None, precision="off,bfloat16", quick=True)
    assert (quick.models, quick.batch_sizes, quick.jit, quick.precision) == (["mlp"], [32, 256], ["off"],
                                                                             ["off", "bfloat16"])
    assert quick.time_box_s < full.time_box_s and quick.gpu_time_box_s > quick.time_box_s
    args = quick.container_args("gpu")
    assert args[:2] == ["--device", "gpu"]
    assert args[args.index("--precision") + 1] == "off,bfloat16"
    assert args[args.index("--time-box") + 1] == str(quick.gpu_time_box_s)
    assert full.container_args("cpu")[full.container_args("cpu").index("--batch-sizes") + 1] == "32,128,512,1024"


@pytest.mark.parametrize("spec, parsed", [(None, "auto"), ("auto", "auto"), ("none", "none"), ("all", "all"),
                                          ("1,0", [0, 1]), ("device=2", [2])])
def test_parse_gpus(spec, parsed):
    assert bench.parse_gpus(spec) == parsed


@pytest.mark.parametrize("spec", ["gpu0", "0,x", "device=", "-1"])
def test_parse_gpus_rejects(spec):
    with pytest.raises(UsageError):
        bench.parse_gpus(spec)


@pytest.mark.parametrize("argv, text", [
    (["bench", "--models", "foo"], "--models"),
    (["bench", "--batch-sizes", "a,b"], "--batch-sizes"),
    (["bench", "--gpus", "gpu0"], "--gpus"),
    (["bench", "--timeout", "0"], "--timeout"),
    (["bench", "no-such-variant"], "unknown variant"),
])
def test_cli_bad_input_is_one_line_and_exit_2_before_docker(argv, text, capsys, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent.sock")  # Docker must not even be asked
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kerasenv: error:") and text in err[0]


def test_cli_bench_report_needs_a_results_directory(tmp_path, capsys):
    assert cli.main(["bench-report", "-o", str(tmp_path / "nothing")]) == 2
    assert "kerasenv bench" in capsys.readouterr().err


# --- devices, from recorded nvidia-smi outputs ---------------------------------------------

def test_plan_on_a_recorded_two_gpu_host(monkeypatch, real_matrix):
    gpus = host_gpus(monkeypatch, "multi-gpu")  # TITAN V + RTX 5880 Ada, driver 570.86.15
    v = real_matrix.get("tf2.21-cuda12.9")
    devices = bench.plan_devices(v, "auto", gpus, docker_gpus=True)
    assert [(d.id, d.kind, d.gpus_request) for d in devices] == [
        ("cpu", "cpu", "none"), ("gpu0", "gpu", "device=0"), ("gpu1", "gpu", "device=1")]
    assert (devices[1].name, devices[1].compute_capability) == ("NVIDIA TITAN V", "7.0")
    assert devices[2].compute_capability == "8.9"
    assert [d.id for d in bench.plan_devices(v, [1], gpus, docker_gpus=True)] == ["cpu", "gpu1"]
    assert [d.id for d in bench.plan_devices(v, "none", gpus, docker_gpus=True)] == ["cpu"]
    with pytest.raises(UsageError, match="not 5"):
        bench.plan_devices(v, [5], gpus, docker_gpus=True)


def test_plan_on_a_recorded_h100_table_only_host(monkeypatch, real_matrix):
    gpus = host_gpus(monkeypatch, "h100-550")  # 2x H100 NVL; plain table only
    devices = bench.plan_devices(real_matrix.get("tf2.21-cuda12.9"), "all", gpus, docker_gpus=True)
    assert [d.id for d in devices] == ["cpu", "gpu0", "gpu1"]
    assert devices[1].compute_capability == "9.0"  # from the name table (no compute_cap query recorded)


def test_no_usable_gpu_auto_falls_back_to_cpu_and_explicit_request_exits_3(monkeypatch, real_matrix):
    v = real_matrix.get("tf2.21-cuda12.9")
    said = []
    no_driver = host_gpus(monkeypatch, "no-driver")
    assert [d.id for d in bench.plan_devices(v, "auto", no_driver, True, say=said.append)] == ["cpu"]
    assert "CPU only" in said[0] and "driver" in said[0]
    with pytest.raises(bench.NoGpuForBench) as exc:
        bench.plan_devices(v, "all", no_driver, True)
    assert exc.value.exit_code == 3
    two = host_gpus(monkeypatch, "multi-gpu")
    with pytest.raises(bench.NoGpuForBench, match="Docker cannot give GPUs"):
        bench.plan_devices(v, [0], two, docker_gpus=False)
    assert [d.id for d in bench.plan_devices(v, "auto", two, docker_gpus=False)] == ["cpu"]


def test_gpus_for_the_cpu_image_is_a_usage_error(monkeypatch, real_matrix):
    gpus = host_gpus(monkeypatch, "multi-gpu")
    cpu = real_matrix.get("tf2.21-cpu")
    assert [d.id for d in bench.plan_devices(cpu, "auto", gpus, True)] == ["cpu"]
    with pytest.raises(UsageError, match="CUDA variant"):
        bench.plan_devices(cpu, "all", gpus, True)


# --- the GPU path, end to end without a GPU ---------------------------------------------------

def _at(stamp: str) -> float:
    return time.mktime(datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S").timetuple())


def _container_result(results: list[dict], **extra) -> str:
    doc = {"schema": 1, "kind": "kerasenv-bench-container",
           "versions": {"tensorflow": "2.21.0", "keras": "3.15.1", "python": "3.11.2", "numpy": "2.4.6"},
           "device": {"kind": "gpu", "name": "NVIDIA RTX A5000", "compute_capability": "8.6", "tf_device": "/GPU:0"},
           "models": {"conv": "..."}, "settings": {"precisions": ["off"]}, "results": results,
           "wall_seconds": 30.0, **extra}
    return "some TensorFlow line\n" + bench.RESULT_PREFIX + json.dumps(doc) + "\n"


def test_gpu_device_run_attributes_recorded_samples_to_each_steady_state_window(tmp_path, monkeypatch, real_matrix):
    """The container is a stand-in (its throughput numbers are test inputs, not measurements);
    the utilisation comes from the recorded RTX A5000 loop, replayed by fake-nvidia-smi-loop."""
    monkeypatch.setenv("KERASENV_FIXTURE_QUERY", "a5000-train-steady")
    recorded_query = (REPO / "tests/fixtures/nvidia-smi-query/a5000-train-steady/query.txt").read_text().split()[1]
    fields = gpu_sampler.parse_fields(recorded_query)
    results = [
        {"model": "conv", "batch_size": 512, "jit": "off", "precision": "off", "status": "ok",
         "samples_per_second": 1.0, "time_to_first_step_s": 1.0, "timed_steps": 10, "timed_seconds": 1.0,
         "window": [_at("2025/05/25 00:08:11"), _at("2025/05/25 00:08:21")]},
        {"model": "conv", "batch_size": 32, "jit": "off", "precision": "off", "status": "ok",
         "samples_per_second": 1.0, "time_to_first_step_s": 1.0, "timed_steps": 10, "timed_seconds": 1.0,
         "window": [_at("2025/05/25 00:08:00"), _at("2025/05/25 00:08:07")]},
        {"model": "conv", "batch_size": 65536, "jit": "off", "precision": "off", "status": "failed",
         "failure": "oom", "reason": "out of memory: OOM when allocating tensor"},
    ]
    calls = []

    def runner(client, v, command, *, gpus_request, timeout):
        calls.append((command, gpus_request))
        time.sleep(1.5)  # the replay prints its 24 lines meanwhile
        return 0, _container_result(results), "[bench] done\n"

    def sampler_factory(indexes, interval_ms):
        return gpu_sampler.NvidiaSmiSampler(FAKE_LOOP, indexes=indexes, interval_ms=interval_ms, fields=fields)

    v = real_matrix.get("tf2.21-cuda12.9")
    device = bench.Device(id="gpu0", kind="gpu", gpus_request="device=0", host_index=0, name="NVIDIA RTX A5000",
                          compute_capability="8.6")
    settings = bench.settings_from(models="conv", batch_sizes="32,512", jit=None, precision=None, quick=True)
    run = bench.run_device(None, v, device, settings, tmp_path, host={"cpu_cores": 2}, runner=runner,
                           sampler_factory=sampler_factory, say=lambda m: None)
    command, request = calls[0]
    assert request == "device=0" and command[:3] == ["python", "-m", "kerasenv_image.bench"]  # the image's own
    assert command[command.index("--device") + 1] == "gpu"
    assert run.path == tmp_path / "results" / "bench-tf2.21-cuda12.9-gpu0.json"
    doc = json.loads(run.path.read_text())
    assert doc["gpu_sampling"]["samples"] == 23 and doc["gpu_sampling"]["gpu_index"] == 0
    steady, idle, failed = doc["results"]
    assert steady["gpu"]["samples"] == 9
    assert steady["gpu"]["utilization_gpu_mean"] == pytest.approx((96 + 99 + 100 * 5 + 88 + 93) / 9)
    assert steady["gpu"]["memory_used_mib_max"] == 13067
    # 00:08:00 + 1 s settle .. 00:08:07: samples 01.114 .. 06.193 (1, 3, 7, 2, 1, 1 %), not 07.209 (12 %)
    assert (idle["gpu"]["samples"], idle["gpu"]["utilization_gpu_max"]) == (6, 7)
    assert idle["gpu"]["utilization_gpu_mean"] == pytest.approx(15 / 6)
    assert "gpu" not in failed and failed["reason"].startswith("out of memory")
    assert doc["device"]["compute_capability"] == "8.6" and doc["versions"]["tensorflow"] == "2.21.0"
    assert bench.summary_lines(doc)[0].endswith("GPU 97%")
    assert "FAILED: out of memory" in bench.summary_lines(doc)[2]


def test_gpu_run_without_host_nvidia_smi_says_utilisation_was_not_sampled(tmp_path, monkeypatch, real_matrix):
    monkeypatch.delenv("KERASENV_NVIDIA_SMI", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    results = [{"model": "mlp", "batch_size": 32, "jit": "off", "precision": "off", "status": "ok",
                "samples_per_second": 1.0, "time_to_first_step_s": 1.0, "timed_steps": 3, "timed_seconds": 1.0,
                "window": [1.0, 2.0]}]
    run = bench.run_device(None, real_matrix.get("tf2.21-cuda12.9"),
                           bench.Device(id="gpu0", kind="gpu", gpus_request="device=0", host_index=0),
                           bench.settings_from(models=None, batch_sizes=None, jit=None, precision=None, quick=True),
                           tmp_path, host={}, runner=lambda *a, **k: (0, _container_result(results), ""),
                           say=lambda m: None)
    assert "not sampled" in run.document["gpu_sampling"]["note"]
    assert "gpu" not in run.document["results"][0]


def test_container_without_results_or_without_a_gpu(tmp_path, real_matrix):
    v = real_matrix.get("tf2.21-cpu")
    cpu = bench.Device(id="cpu", kind="cpu", gpus_request="none")
    settings = bench.settings_from(models=None, batch_sizes=None, jit=None, precision=None, quick=True)
    with pytest.raises(KerasenvError, match="exited 137 without results") as exc:
        bench.run_device(None, v, cpu, settings, tmp_path, host={},
                         runner=lambda *a, **k: (137, "", "line 1\nKilled\n"), say=lambda m: None)
    assert "Killed" in exc.value.details
    error = bench.RESULT_PREFIX + json.dumps({"error": "--device gpu: TensorFlow sees no GPU in this container"})
    with pytest.raises(bench.NoGpuForBench):
        bench.run_device(None, real_matrix.get("tf2.21-cuda12.9"),
                         bench.Device(id="gpu0", kind="gpu", gpus_request="device=0", host_index=0), settings,
                         tmp_path, host={}, runner=lambda *a, **k: (3, error, ""),
                         sampler_factory=lambda **k: type("S", (), {"available": False})(), say=lambda m: None)
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").iterdir())


def test_write_json_is_atomic_and_leaves_no_temporary_file(tmp_path):
    path = tmp_path / "results" / "bench-x-cpu.json"
    bench.write_json(path, {"a": 1})
    bench.write_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["bench-x-cpu.json"]
    with pytest.raises(ValueError):
        bench.write_json(path, {"a": float("nan")})  # not JSON: the old file stays whole
    assert json.loads(path.read_text()) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["bench-x-cpu.json"]


def test_host_info_reads_this_machine():
    info = bench.host_info()
    assert info["cpu_cores"] >= 1 and info["memory_bytes"] > 2**28 and info["gpus"] == []


def test_the_rocm_image_is_benchmarked_on_the_cpu_only_so_it_gets_no_amd_device_or_group(real_matrix):
    """GPU benchmarks run in a CUDA variant (plan_devices); the ROCm image's CPU run goes through
    runner.run with `none`, so no device node and no AMD group (runner.gpu_and_groups)."""
    from kerasenv.run import runner

    rocm = real_matrix.get("tf2.17-rocm6.3")
    devices = bench.plan_devices(rocm, "auto", None, False)
    assert [d.gpus_request for d in devices] == ["none"]
    from kerasenv.engine import gpu_request

    assert runner.gpu_and_groups(gpu_request.resolve(devices[0].gpus_request, rocm.family)) == {"group_add": ["0"]}
    with pytest.raises(UsageError, match="GPU benchmarks run in a CUDA variant"):
        bench.plan_devices(rocm, "all", None, False)


def test_under_wsl2_one_gpu_is_benchmarked_through_all_and_several_are_refused(real_matrix):
    """WSL2 gives a container every GPU or none (CUDA on WSL guide 5.1): no `device=N`."""
    from kerasenv.host import nvidia_smi

    v = real_matrix.get(real_matrix.default_gpu)
    one = nvidia_smi.HostGpus(present=True, driver_version="572.70", gpus=[
        nvidia_smi.Gpu(index=0, name="NVIDIA GeForce RTX 5090", compute_capability="12.0")])
    gpus = [d for d in bench.plan_devices(v, "auto", one, True, all_only=True) if d.kind == "gpu"]
    assert [(d.id, d.gpus_request) for d in gpus] == [("gpu0", "all")]
    two = nvidia_smi.HostGpus(present=True, driver_version="572.70", gpus=one.gpus + [
        nvidia_smi.Gpu(index=1, name="NVIDIA GeForce RTX 4090", compute_capability="8.9")])
    with pytest.raises(UsageError, match="under WSL2 a container gets every GPU or none"):
        bench.plan_devices(v, "auto", two, True, all_only=True)
