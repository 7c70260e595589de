"""`kerasenv doctor --container`: reading the in-image probe, and what is reported when
the GPU container cannot start (the probe itself runs in the images: smoke_tests/)."""

from __future__ import annotations

import json

from kerasenv.host import container_probe, gpu_choice
from kerasenv.engine import docker_client, gpu_request
from kerasenv.errors import KerasenvError


def _no_engine_resolver(monkeypatch):
    """`--gpus` resolved as for Docker with the runtime hook (the engine is not asked here)."""
    monkeypatch.setattr(gpu_choice, "Resolver",
                        lambda client: lambda v, spec, say=None: gpu_request.resolve(spec, v.family))


def _spec(gpus) -> str:
    return "none" if gpus is None else str(gpus.spec)

OK = {"nvidia_smi_l": "GPU 0: NVIDIA A100", "tf_gpus": ["/physical_device:GPU:0"], "failed": [], "later": {}}


def test_the_probes_last_json_line_is_its_result():
    out = "a TensorFlow warning\n{\"old\": 1}\n" + json.dumps(OK) + "\n\n"
    assert container_probe.parse_output(out, 0) == OK


def test_no_json_or_broken_json_is_a_failure_naming_the_exit_status():
    expected = {"nvidia_smi_l": "probe failed (exit 139)", "tf_gpus": []}
    assert container_probe.parse_output("Segmentation fault\n", 139) == expected
    assert container_probe.parse_output("{not json\n", 139) == expected
    assert container_probe.parse_output("", 139) == expected


def test_an_image_without_the_probe_module_is_told_to_rebuild():
    # What kerasenv:tf2.21-cpu built before the probes moved into kerasenv_image printed.
    stderr = ("/opt/venv/bin/python: Error while finding module specification for "
              "'kerasenv_image.probes.gpu_libraries' (ModuleNotFoundError: No module named 'kerasenv_image.probes')\n")
    data = container_probe.parse_output("", 1, stderr)
    assert data["tf_gpus"] == [] and data["nvidia_smi_l"].startswith("probe failed (exit 1): ")
    assert "rebuild it (`make build VARIANT=<id>`)" in data["nvidia_smi_l"]
    assert container_probe.parse_output("", 139, "Segmentation fault\n") == \
        {"nvidia_smi_l": "probe failed (exit 139)", "tf_gpus": []}


def _probe(monkeypatch, answer):
    calls = []

    def probe_json(client, v, command, gpus):
        calls.append((command[-1], _spec(gpus)))
        return answer(command, _spec(gpus))

    _no_engine_resolver(monkeypatch)
    monkeypatch.setattr(docker_client, "client", lambda: object())
    monkeypatch.setattr(container_probe, "probe_json", probe_json)
    return calls


def test_a_cuda_image_that_sees_its_gpu_passes_every_line(monkeypatch, real_matrix):
    v = real_matrix.get(real_matrix.default_gpu)
    calls = _probe(monkeypatch, lambda command, gpus: dict(OK))
    data = container_probe.probe(v, "all")
    assert calls == [("--devices", "all")]
    assert data["status"] == {"nvidia_smi_l": "PASS", "tf_gpus": "PASS", "tf_gpu_libraries": "PASS"}
    assert data["tf_gpu_libraries"].startswith("TryDlopenCUDALibraries() OK")


def test_when_the_gpu_container_cannot_start_the_library_check_still_runs_without_gpus(monkeypatch, real_matrix):
    v = real_matrix.get(real_matrix.default_gpu)

    def answer(command, gpus):
        if gpus != "none":
            raise KerasenvError("Docker cannot give GPUs to containers here (--gpus all)")
        return {"failed": ["TensorFlow cannot dlopen libcudnn.so.9"], "later": {}}

    calls = _probe(monkeypatch, answer)
    data = container_probe.probe(v, "all")
    assert [gpus for _, gpus in calls] == ["all", "none"]
    assert calls[1][0] != "--devices"  # the library check alone
    assert data["nvidia_smi_l"].startswith("Docker cannot give GPUs") and data["tf_gpus"] == []
    assert data["status"] == {"nvidia_smi_l": "FAIL", "tf_gpus": "FAIL", "tf_gpu_libraries": "FAIL"}
    assert "libcudnn.so.9" in data["tf_gpu_libraries"] and f"VARIANT={v.id}" in data["tf_gpu_libraries"]


def test_a_cpu_image_lists_devices_only_and_has_no_library_line(monkeypatch, real_matrix):
    v = real_matrix.get(real_matrix.default_cpu)
    calls = _probe(monkeypatch, lambda command, gpus: {"nvidia_smi_l": "", "tf_gpus": []})
    data = container_probe.probe(v, "none")
    assert calls == [("--devices-only", "none")]
    assert data["status"] == {"nvidia_smi_l": "FAIL", "tf_gpus": "FAIL"} and "tf_gpu_libraries" not in data


def test_doctor_verdict_passes_with_no_failure_and_names_the_fix_otherwise(real_matrix):
    v = real_matrix.get(real_matrix.default_gpu)
    line, status = container_probe.gpu_library_verdict({"failed": [], "later": {"nvjitlink": {}}}, v)
    assert status == "PASS" and line.startswith("TryDlopenCUDALibraries() OK") and "nvJitLink" in line
    line, status = container_probe.gpu_library_verdict({"failed": ["TensorFlow cannot dlopen libcusolver.so.11"]}, v)
    assert status == "FAIL" and "libcusolver.so.11" in line and f"make build VARIANT={v.id}" in line
    assert "\n" not in line
    assert container_probe.gpu_library_verdict({}, v)[1] == "FAIL"


def test_the_probe_is_the_images_own_module_run_by_the_images_python(monkeypatch, real_matrix):
    commands = []

    def probe_json(client, v, command, gpus):
        commands.append(command)
        return dict(OK)

    _no_engine_resolver(monkeypatch)
    monkeypatch.setattr(docker_client, "client", lambda: object())
    monkeypatch.setattr(container_probe, "probe_json", probe_json)
    v = real_matrix.get(real_matrix.default_gpu)
    container_probe.probe(v, "all")
    assert commands == [[v.interpreter, "-m", "kerasenv_image.probes.gpu_libraries", "--devices"]]


JAX_OK = {"backend": "jax", "nvidia_smi_l": "GPU 0: NVIDIA H200", "gpus": ["cuda:0"], "tf_gpus": ["cuda:0"],
          "failed": [], "libraries": {}, "ptxas": {"targets": {"sm_50": {"ok": True}, "sm_100a": {"ok": True},
                                                                "sm_120a": {"ok": True}}}}


def test_a_jax_image_runs_its_backends_check_and_its_lines_are_named_after_jax(monkeypatch, real_matrix):
    v = real_matrix.get("jax0.12-cuda12.9")
    commands = []

    def probe_json(client, variant, command, gpus):
        commands.append(command)
        return dict(JAX_OK)

    _no_engine_resolver(monkeypatch)
    monkeypatch.setattr(docker_client, "client", lambda: object())
    monkeypatch.setattr(container_probe, "probe_json", probe_json)
    data = container_probe.probe(v, "all")
    assert commands == [[v.interpreter, "-m", "kerasenv_image.probes.gpu_libraries", "--backend", "jax", "--devices"]]
    assert data["status"] == {"nvidia_smi_l": "PASS", "jax_gpus": "PASS", "jax_gpu_libraries": "PASS"}
    assert data["jax_gpu_libraries"].endswith("XLA's ptxas compiles for sm_50, sm_100a, sm_120a")
    assert "tf_gpus" not in data


def test_a_torch_image_that_cannot_load_cudnn_fails_its_line_naming_the_library(monkeypatch, real_matrix):
    v = real_matrix.get("torch2.15-cuda13.2")

    def answer(command, gpus):
        if gpus != "none":
            raise KerasenvError("Docker cannot give GPUs to containers here (--gpus all)")
        return {"backend": "torch", "failed": ["import torch failed: libcudnn.so.9"]}

    _probe(monkeypatch, answer)
    data = container_probe.probe(v, "all")
    assert data["status"] == {"nvidia_smi_l": "FAIL", "torch_gpus": "FAIL", "torch_gpu_libraries": "FAIL"}
    assert "libcudnn.so.9" in data["torch_gpu_libraries"] and "\n" not in data["torch_gpu_libraries"]


def test_ptxas_targets_reads_one_ptxas_or_tritons_several():
    one = {"targets": {"sm_75": {"ok": True}, "sm_120a": {"ok": False}}}
    assert container_probe._ptxas_targets(one) == ["sm_75"]
    assert container_probe._ptxas_targets({"ptxas": one, "ptxas-blackwell": {"targets": {"sm_120a": {"ok": True}}}}) \
        == ["sm_75", "sm_120a"]


def test_the_rocm_image_is_judged_by_its_gpu_list_alone_it_has_no_nvidia_smi(monkeypatch, real_matrix):
    """`make verify-gpu VARIANT=tf2.17-rocm6.3` on an AMD host: no nvidia-smi line to fail."""
    v = real_matrix.get(real_matrix.default_rocm)
    _probe(monkeypatch, lambda command, gpus: {"nvidia_smi_l": "nvidia-smi: not found",
                                               "tf_gpus": ["/physical_device:GPU:0"]})
    assert container_probe.probe(v, "all")["status"] == {"tf_gpus": "PASS"}
    _probe(monkeypatch, lambda command, gpus: {"nvidia_smi_l": "", "tf_gpus": []})
    assert container_probe.probe(v, "all")["status"] == {"tf_gpus": "FAIL"}


def test_a_gpu_request_the_engine_would_drop_is_a_failed_line_and_the_library_check_still_runs(
        monkeypatch, real_matrix):
    """Podman 4.x behind DOCKER_HOST: resolving --gpus refuses (gpu_request), nothing runs with it."""
    from kerasenv.engine.engine_facts import Engine

    monkeypatch.setattr(gpu_choice, "Resolver", lambda client: lambda v, spec, say=None: gpu_request.resolve(
        spec, v.family, engine=Engine("podman", "4.3.1"), host=gpu_request.HostGpus()))
    calls = []

    def probe_json(client, v, command, gpus):
        calls.append(_spec(gpus))
        return {"failed": [], "later": {}}

    monkeypatch.setattr(docker_client, "client", lambda: object())
    monkeypatch.setattr(container_probe, "probe_json", probe_json)
    data = container_probe.probe(real_matrix.get(real_matrix.default_gpu), "all")
    assert calls == ["none"]  # only the library check, without a GPU
    assert "containers/podman#22645" in data["nvidia_smi_l"]
    assert data["status"] == {"nvidia_smi_l": "FAIL", "tf_gpus": "FAIL", "tf_gpu_libraries": "PASS"}
