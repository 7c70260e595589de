"""Doctor verdicts against recorded nvidia-smi outputs (tests/fixtures/nvidia-smi/): public
captures, and for the H100/H200/GH200/multi-GPU hosts a simulator's output (listed in SIMULATED).

The host is replayed by tests/fixtures/fake-nvidia-smi, which prints only what was
recorded (SOURCES.md names each source) and refuses anything else.
"""

from __future__ import annotations

import dataclasses

import pytest

from kerasenv.host import doctor
from kerasenv.host.doctor import FAIL, INFO, PASS, WARN

from ...conftest import REPO

FAKE_SMI = str(REPO / "tests" / "fixtures" / "fake-nvidia-smi")


def facts_for(host: str, monkeypatch, *, toolkit: bool = True) -> doctor.HostFacts:
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", host)
    return doctor.HostFacts(nvidia=doctor.probe_nvidia(FAKE_SMI),
                            docker_runtimes=["nvidia", "runc"] if toolkit else ["runc"])


def unrecorded(matrix):
    """The matrix as it was before kernel-targets.json: TF's published lists only."""
    return dataclasses.replace(matrix, variants=tuple(dataclasses.replace(v, recorded_kernels=None)
                                                      for v in matrix.variants))


def verdicts(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name.removeprefix("variant "): c for c in report.variants}


def host_check(report: doctor.Report, name: str) -> doctor.Check:
    return next(c for c in report.host if c.name == name)


def test_no_driver_fails_the_driver_check_and_recommends_the_cpu_image(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("no-driver", monkeypatch), real_matrix)
    check = host_check(report, "nvidia-driver")
    assert check.status == FAIL and "not loaded" in check.message and "modprobe" in check.fix
    assert report.recommended == real_matrix.default_cpu and not report.gpu_usable
    assert all(c.status == INFO for v, c in verdicts(report).items() if v.startswith("tf2") and "cuda" in v)


def test_missing_nvidia_smi_is_information_not_failure(real_matrix, monkeypatch):
    monkeypatch.setattr(doctor.shutil, "which", lambda name: None)
    monkeypatch.delenv("KERASENV_NVIDIA_SMI", raising=False)
    facts = doctor.HostFacts(nvidia=doctor.probe_nvidia())
    report = doctor.judge(facts, real_matrix)
    assert host_check(report, "nvidia-driver").status == INFO
    assert report.recommended == real_matrix.default_cpu


def test_driver_470_fails_cuda12_naming_the_minimum_and_the_newest_runnable_variant(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("driver-470", monkeypatch), real_matrix)
    v = verdicts(report)
    for variant_id in ("tf2.21-cuda12.9", "tf2.20-cuda12.5", "tf2.17-cuda12.3", "tf2.15-cuda12.2"):
        assert v[variant_id].status == FAIL
        assert "470.182.03 is older than 525.60.13" in v[variant_id].message
        # tf2.14's recorded kernels are native for this GPU: named as such.
        assert "tf2.14-cuda11.8 runs on it, with native kernels for this GPU" in v[variant_id].message
    # The full-feature floor: the CUDA 12.9.1 wheels' own driver.
    assert v["tf2.21-cuda12.9"].fix.startswith("upgrade the NVIDIA driver to >= 575.57.08")
    assert v["tf2.20-cuda12.5"].fix.startswith("upgrade the NVIDIA driver to >= 555.42.06")
    assert v["tf2.14-cuda11.8"].status == PASS
    assert report.recommended == "tf2.14-cuda11.8" and report.gpu_usable


def test_driver_470_degrades_to_the_name_table_without_compute_cap(real_matrix, monkeypatch):
    facts = facts_for("driver-470", monkeypatch)
    gpu = facts.nvidia.gpus[0]
    assert (gpu.name, gpu.compute_capability, gpu.compute_capability_source) == \
        ("Tesla V100-SXM2...", "7.0", "name table")
    assert any("no compute_cap query field" in note for note in facts.nvidia.notes)


def test_a100_on_535_runs_every_cuda_variant_and_gets_the_default_gpu_image(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("a100-535", monkeypatch), real_matrix)
    v = verdicts(report)
    cuda = [x.id for x in real_matrix.variants if x.family == "cuda"]
    assert "jax0.12-cuda12.9" in cuda and "torch2.15-cuda13.2" in cuda
    assert all(v[i].status == PASS for i in cuda if i != "torch2.15-cuda13.2")
    assert all(v[i].status == PASS for i in v if "cuda" in i and i.startswith("tf"))
    assert "minor-version compatibility" in v["tf2.21-cuda12.9"].message  # 535 < 575.57.08, native sm_80
    assert "driver below 575.57.08, the CUDA 12.9 wheels' own" in v["tf2.21-cuda12.9"].message
    # JAX: native sm_80, on the same CUDA 12.9 wheels under minor-version compatibility.
    assert "PTX" not in v["jax0.12-cuda12.9"].message
    assert "driver below 575.57.08, the CUDA 12.9 wheels' own" in v["jax0.12-cuda12.9"].message
    # PyTorch's CUDA 13.2 does not load on R535.
    torch = v["torch2.15-cuda13.2"]
    assert torch.status == FAIL and "driver 535.129.03 is older than 580.65.06" in torch.message
    assert torch.fix == "upgrade the NVIDIA driver to >= 580.65.06"
    assert report.recommended == real_matrix.default_gpu


def test_h100_on_550_runs_tf_2_17_plus_natively_as_their_binaries_carry_sm_90(real_matrix, monkeypatch):
    # TF's published list says compute_90 PTX only; the binaries (kernel-targets.json) carry
    # SASS sm_90 too, so the PTX JIT driver floor (555.42.06) does not apply to an H100.
    report = doctor.judge(facts_for("h100-550", monkeypatch), real_matrix)
    v = verdicts(report)
    for variant_id in ("tf2.21-cuda12.9", "tf2.20-cuda12.5", "tf2.17-cuda12.3"):
        assert v[variant_id].status == PASS and "PTX" not in v[variant_id].message
    assert "GPU 0,1 run JIT-compiled PTX" in v["tf2.15-cuda12.2"].message  # SASS up to sm_80, compute_80
    assert report.recommended == real_matrix.default_gpu


def test_without_a_record_the_published_list_decides_and_h100_on_550_fails_for_ptx_jit(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("h100-550", monkeypatch), unrecorded(real_matrix))
    v = verdicts(report)
    for variant_id in ("tf2.21-cuda12.9", "tf2.20-cuda12.5"):
        assert v[variant_id].status == FAIL
        assert "gets only PTX" in v[variant_id].message
        assert "needs driver >= 555.42.06, this host has 550.54.14" in v[variant_id].message
    assert v["tf2.17-cuda12.3"].status == PASS  # PTX from CUDA 12.3 JITs on 550 (>= 545.23.06)
    # No published list for JAX: unrecorded, its kernels are not judged (a warning, not a crash).
    jax = v["jax0.12-cuda12.9"]
    assert jax.status == WARN and "kernel targets unknown (not recorded): kernel support not checked" in jax.message
    assert v["torch2.15-cuda13.2"].status == FAIL and "older than 580.65.06" in v["torch2.15-cuda13.2"].message
    assert report.recommended == "tf2.17-cuda12.3"


def test_h100_on_565_passes_the_cuda12_5_images(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("multi-gpu-h100x8", monkeypatch), real_matrix)
    v = verdicts(report)
    assert v["tf2.21-cuda12.9"].status == PASS and "PTX" not in v["tf2.21-cuda12.9"].message  # SASS sm_90
    assert v["tf2.15-cuda12.2"].status == PASS
    assert "GPU 0,1,2,3,4,5,6,7 run JIT-compiled PTX" in v["tf2.15-cuda12.2"].message
    assert len(host_check_names(report, "gpu")) == 8
    assert report.recommended == real_matrix.default_gpu


def host_check_names(report: doctor.Report, prefix: str) -> list[str]:
    return [c.name for c in report.host if c.name.startswith(prefix)]


def test_multi_gpu_from_the_csv_query_alone(real_matrix, monkeypatch):
    facts = facts_for("multi-gpu", monkeypatch)
    assert facts.nvidia.driver_version == "570.86.15"
    assert [(g.name, g.compute_capability) for g in facts.nvidia.gpus] == \
        [("NVIDIA TITAN V", "7.0"), ("NVIDIA RTX 5880 Ada Generation", "8.9")]
    v = verdicts(doctor.judge(facts, real_matrix))
    assert v["tf2.21-cuda12.9"].status == PASS and "PTX" not in v["tf2.21-cuda12.9"].message
    # TF 2.14's binaries carry SASS sm_80, which runs on Ada 8.9 (its published list says compute_80)
    assert v["tf2.14-cuda11.8"].status == PASS and "PTX" not in v["tf2.14-cuda11.8"].message


def test_unknown_compute_capability_warns_instead_of_crashing(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("driver-470-geforce", monkeypatch), real_matrix)
    assert host_check(report, "gpu0").status == WARN
    assert verdicts(report)["tf2.14-cuda11.8"].status == WARN


def test_driver_version_comes_from_driver_not_from_the_nvidia_smi_binary(monkeypatch):
    facts = facts_for("userspace-470-driver-580", monkeypatch)
    assert facts.nvidia.driver_version == "580.95.05"


def test_driver_library_mismatch_says_reboot(real_matrix, monkeypatch):
    check = host_check(doctor.judge(facts_for("nvml-mismatch", monkeypatch), real_matrix), "nvidia-driver")
    assert check.status == FAIL and "reboot" in check.fix


def test_gpu_without_container_toolkit_fails_and_falls_back_to_cpu(real_matrix, monkeypatch):
    report = doctor.judge(facts_for("a100-535", monkeypatch, toolkit=False), real_matrix)
    check = host_check(report, "container-toolkit")
    assert check.status == FAIL and "nvidia-ctk runtime configure" in check.fix
    assert report.recommended == real_matrix.default_cpu
    assert "Container Toolkit" in report.reason


@pytest.mark.parametrize("cc, targets, expected", [
    ("8.6", ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"), "native"),  # sm_80 SASS runs on 8.6
    ("9.0", ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"), "ptx"),
    ("12.0", ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"), "ptx"),
    ("5.2", ("sm_60", "sm_70", "sm_80", "sm_89", "compute_90"), "none"),
    ("3.7", ("sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"), "native"),
    ("8.9", ("sm_35", "sm_50", "sm_60", "sm_70", "sm_75", "compute_80"), "ptx"),
    ("9.0", ("sm_80", "sm_90a"), "native"),  # sm_90a: exactly 9.0
    ("10.0", ("sm_90a", "compute_90a"), "none"),  # arch-specific code runs on its arch only
    ("10.3", ("sm_100a", "compute_90"), "ptx"),
    ("10.3", ("sm_100",), "native"),
    ("12.1", ("sm_100", "sm_120"), "native"),
    ("12.0", ("sm_100", "sm_121"), "none"),  # sm_121 does not run on 12.0, sm_100 not on 12.x
])
def test_kernel_support_follows_cuda_binary_compatibility(cc, targets, expected):
    assert doctor.kernel_support(cc, targets) == expected


def test_text_report_names_each_fail_with_its_fix(real_matrix, monkeypatch):
    text = doctor.format_text(doctor.judge(facts_for("h100-550", monkeypatch), unrecorded(real_matrix)))
    assert "fix: upgrade the NVIDIA driver to >= 555.42.06" in text
    assert text.splitlines()[-1].startswith("recommended: kerasenv:tf2.17-cuda12.3")


def test_a_blackwell_host_below_580_is_pointed_at_the_jax_image_not_the_newest_tf(real_matrix, monkeypatch):
    torch = verdicts(doctor.judge(facts_for("rtx5090-572", monkeypatch), real_matrix))["torch2.15-cuda13.2"]
    assert torch.status == FAIL and "older than 580.65.06" in torch.message
    assert "jax0.12-cuda12.9 runs on it, with native kernels for this GPU" in torch.message


@pytest.mark.parametrize("version,status,says", [
    ("20.10.24+dfsg1", "INFO", "Docker 20.10.24+dfsg1 cannot unpack zstd layers (Docker >= 23.0 and containerd can)"),
    ("29.3.0", "PASS", "Docker 29.3.0 unpacks zstd layers"),
    ("weird", "INFO", "version not understood"),
])
def test_the_doctor_says_whether_docker_unpacks_zstd(version, status, says):
    check = doctor.zstd_check(version)
    assert (check.status, check.name) == (status, "zstd") and says in check.message


def test_the_doctor_names_the_image_store_and_what_it_means(real_matrix):
    # Issue 43: a user's Docker 28.5.2 with the containerd store was named with its CDI and zstd,
    # never its image store, while `kerasenv size` read compressed bytes there.
    import json

    from kerasenv.engine import engine_facts

    def recorded(name):
        folder = REPO / "tests" / "fixtures" / "engines" / name
        return engine_facts.parse(json.loads((folder / "version.json").read_text()),
                                  json.loads((folder / "info.json").read_text()))

    for name, says in [("docker-28.5.2-containerd", "image store containerd (overlayfs snapshotter): one tag "
                                                     "can hold several platforms"),
                       ("docker-20.10-debian", "image store overlay2 (graph driver): one platform per tag")]:
        e = recorded(name)
        facts = doctor.HostFacts(nvidia=doctor.probe_nvidia("/nonexistent/nvidia-smi"), docker_version=e.version,
                                 engine=e)
        report = doctor.judge(facts, real_matrix)
        store = [c for c in report.host if c.name == "image-store"]
        assert len(store) == 1 and says in store[0].message, store
        assert {"name": "image-store", "status": INFO} .items() <= report.as_dict()["host"][
            [c["name"] for c in report.as_dict()["host"]].index("image-store")].items()
    facts = doctor.HostFacts(nvidia=doctor.probe_nvidia("/nonexistent/nvidia-smi"), docker_version="28.5.2")
    assert not [c for c in doctor.judge(facts, real_matrix).host if c.name == "image-store"]  # engine not asked


def test_the_zstd_line_behind_podman_names_podman_not_a_docker_version():
    check = doctor.zstd_check("5.8.6", podman=True)
    assert check.status == doctor.PASS and check.message.startswith("Podman 5.8.6 unpacks zstd layers")
