"""The doctor on host shapes this machine is not: WSL2, MIG, CDI, rootless Docker and Podman.

Each host is replayed from recorded outputs (tests/fixtures/nvidia-smi/: the RTX 5090 table is
a capture inside WSL2, the MIG tables and `-L` are captures; SOURCES.md), recorded or
constructed engine answers (tests/fixtures/engines/README.md) and constructed file trees
(tests/fixtures/host-shapes/README.md): each test names which.
"""

from __future__ import annotations

import json

import pytest

from kerasenv.engine import cdi, engine_facts, gpu_request
from kerasenv.engine.cdi import GENERATE_FIX
from kerasenv.errors import UsageError
from kerasenv.host import doctor, gpu_choice, shape_checks, wsl
from kerasenv.host.checks import FAIL, INFO, PASS, WARN

from ...conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
FAKE_SMI = str(FIXTURES / "fake-nvidia-smi")


def engine(name: str) -> engine_facts.Engine:
    load = lambda what: json.loads((FIXTURES / "engines" / name / f"{what}.json").read_text())  # noqa: E731
    return engine_facts.parse(load("version"), load("info"))


def host(monkeypatch, smi: str, *, shape: str = "linux", engine_name: str = "docker-20.10-debian",
         toolkit: bool = True) -> doctor.HostFacts:
    monkeypatch.setenv("KERASENV_FIXTURE_HOST", smi)
    tree = FIXTURES / "host-shapes" / shape
    return doctor.HostFacts(nvidia=doctor.probe_nvidia(FAKE_SMI), docker_runtimes=["nvidia", "runc"] if toolkit
                            else ["runc"], engine=engine(engine_name), wsl=wsl.detect(tree),
                            cdi=cdi.from_specs(tree))


def line(report: doctor.Report, name: str) -> doctor.Check:
    return next(c for c in report.host if c.name == name)


def verdicts(report: doctor.Report) -> dict[str, doctor.Check]:
    return {c.name.removeprefix("variant "): c for c in report.variants}


# --- WSL2 ------------------------------------------------------------------------------------

def test_wsl2_is_detected_from_its_kernel_and_dxg():
    found = wsl.detect(FIXTURES / "host-shapes" / "wsl2")
    assert found.present and found.dxg and found.libcuda and "microsoft-standard-WSL2" in found.kernel
    assert not wsl.detect(FIXTURES / "host-shapes" / "linux").present


def test_on_wsl2_the_windows_driver_is_judged_by_windows_floors(real_matrix, monkeypatch):
    """RTX 5090 inside WSL2 (a capture: Windows driver 572.70), the WSL2 tree constructed."""
    report = doctor.judge(host(monkeypatch, "rtx5090-572", shape="wsl2"), real_matrix)
    v = verdicts(report)
    assert line(report, "wsl2").status == PASS and "--gpus all" in line(report, "wsl2").message
    # CUDA 13 on Windows needs R580 (580.88, reported): a 572 Windows driver is below it.
    assert v["torch2.15-cuda13.2"].status == FAIL
    assert "Windows driver 572.70 is older than 580.88, the Windows minimum for CUDA 13.2" in \
        v["torch2.15-cuda13.2"].message
    assert v["torch2.15-cuda13.2"].fix.startswith("upgrade the Windows NVIDIA driver to >= 580.88")
    # TF JIT-compiles PTX for Blackwell: usable with a warning, and no allocator setting.
    assert v["tf2.21-cuda12.9"].status == WARN and ALLOCATOR not in v["tf2.21-cuda12.9"].message
    assert report.gpu_usable


ALLOCATOR = "XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async"


def with_jax_kernels(matrix):
    """The matrix with jax0.12-cuda12.9's kernel targets as its recording would have them
    (CONSTRUCTED: SASS up to sm_120 as JAX's cuda12 wheels carry, blackwell.py's sources), so
    that the ranking is tested apart from whether images/jax0.12-cuda12.9/kernel-targets.json
    is recorded yet."""
    from dataclasses import replace

    from kerasenv.matrix.kernel_targets import KernelTargets

    jax = matrix.get("jax0.12-cuda12.9")
    targets = KernelTargets("jax", jax.jax, ("sm_80", "sm_90", "sm_100", "sm_120"), ("compute_120",))
    return replace(matrix, variants=tuple(replace(x, recorded_kernels=targets) if x is jax else x
                                          for x in matrix.variants))


def test_on_wsl2_jax_0_12_works_with_the_cuda_async_allocator_and_says_so(real_matrix, monkeypatch):
    """openxla/xla#48979: JAX >= 0.11's default allocator fails allocations of 4 GiB or more
    under WSL2; XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async works, and kerasenv run sets it there."""
    jax = verdicts(doctor.judge(host(monkeypatch, "rtx5090-572", shape="wsl2"), real_matrix))["jax0.12-cuda12.9"]
    assert jax.status == WARN
    assert ALLOCATOR in jax.message and "openxla/xla#48979" in jax.message and "4 GiB" in jax.message
    assert "`kerasenv run`, `shell`, `smoke` and `lab` set on WSL2" in jax.message
    assert "jax-ml/jax#40558" not in jax.message
    assert f"pass `-e {ALLOCATOR}` yourself" in jax.fix
    # With its kernels recorded: native for the RTX 5090, so only the setting stands between it
    # and a PASS, which kerasenv applies itself: the doctor recommends it, as on Linux.
    report = doctor.judge(host(monkeypatch, "rtx5090-572", shape="wsl2"), with_jax_kernels(real_matrix))
    jax = verdicts(report)["jax0.12-cuda12.9"]
    assert jax.status == WARN and jax.message.startswith(f"works with {ALLOCATOR}, which")
    assert "; otherwise compatible (NVIDIA GeForce RTX 5090 (compute capability 12.0, Blackwell): native" in \
        jax.message
    assert report.recommended == "jax0.12-cuda12.9" and report.gpu_usable
    # TF's verdict names the JAX image as the one with native kernels, and is otherwise as it was.
    tf = verdicts(report)["tf2.21-cuda12.9"]
    assert tf.status == WARN and "kerasenv:jax0.12-cuda12.9 (native kernels for it)" in tf.fix


def test_off_wsl2_jax_needs_no_allocator_setting(real_matrix, monkeypatch):
    report = doctor.judge(host(monkeypatch, "rtx5090-572"), with_jax_kernels(real_matrix))
    jax = verdicts(report)["jax0.12-cuda12.9"]
    assert jax.status == PASS and "XLA_PYTHON_CLIENT_ALLOCATOR" not in jax.message + jax.fix


def test_on_wsl2_jax_0_10_2_still_fails_with_its_own_defect(real_matrix, monkeypatch):
    """jax-ml/jax#40558 describes JAX 0.10.2 (the retired jax0.10-cuda12.9): still a FAIL,
    without the allocator setting, which is not known to mend it."""
    from dataclasses import replace

    matrix = with_jax_kernels(real_matrix)
    old = replace(real_matrix.get("jax0.12-cuda12.9"), id="jax0.10-cuda12.9", jax="0.10.2")
    matrix = replace(matrix, variants=(*matrix.variants, old))
    jax = verdicts(doctor.judge(host(monkeypatch, "rtx5090-572", shape="wsl2"), matrix))["jax0.10-cuda12.9"]
    assert jax.status == FAIL and "jax-ml/jax#40558" in jax.message and "CUDA_ERROR_UNKNOWN" in jax.message
    assert "XLA_PYTHON_CLIENT_ALLOCATOR" not in jax.message + jax.fix
    assert jax.fix.startswith("use kerasenv:jax0.12-cuda12.9")


def test_the_setting_is_keyed_on_the_jax_release_not_the_id(real_matrix):
    from dataclasses import replace

    wsl2 = wsl.detect(FIXTURES / "host-shapes" / "wsl2")
    jax = real_matrix.get("jax0.12-cuda12.9")
    found = shape_checks.setting(jax, wsl2)
    assert found is not None and (found.assignment, found.short_report) == (ALLOCATOR, "openxla/xla#48979")
    assert shape_checks.setting(replace(jax, jax="0.11.0"), wsl2) is found
    assert shape_checks.setting(replace(jax, jax="0.10.2"), wsl2) is None
    assert shape_checks.setting(replace(jax, id="jax-next"), wsl2) is found
    assert shape_checks.setting(real_matrix.get("jax0.12-cpu"), wsl2) is None
    assert shape_checks.setting(jax, wsl.detect(FIXTURES / "host-shapes" / "linux")) is None


def test_the_same_driver_on_linux_is_judged_by_linux_floors(real_matrix, monkeypatch):
    """Without WSL2's signs the 572.70 is a Linux number: JAX's native sm_120 kernels pass."""
    v = verdicts(doctor.judge(host(monkeypatch, "rtx5090-572"), real_matrix))
    assert v["jax0.12-cuda12.9"].status == PASS
    assert "580.65.06" in v["torch2.15-cuda13.2"].message


def test_wsl2_takes_only_all_gpus_when_a_run_selects_one(monkeypatch):
    facts = host(monkeypatch, "rtx5090-572", shape="wsl2")
    with pytest.raises(UsageError, match="under WSL2 a container gets every GPU or none"):
        gpu_request.resolve("device=0", "cuda", host=gpu_choice.from_facts(facts))


# --- MIG -------------------------------------------------------------------------------------

def test_mig_slices_are_listed_with_what_the_backends_see(real_matrix, monkeypatch):
    """A100 80GB with four MIG devices: the `-L` is a capture (MortalGPU README), the CSV constructed."""
    report = doctor.judge(host(monkeypatch, "mig-a100-80gb-list"), real_matrix)
    mig = line(report, "mig")
    assert mig.status == INFO
    assert "0:1 2g.20gb MIG-08bce7f3-bac7-4715-b56f-91541f15fe37" in mig.message
    assert "a whole-card device=N gives none" in mig.message
    assert "with driver 535.129.03 (< R570) CUDA shows a process only the first slice" in mig.message
    assert "N/A per slice" in mig.message


def test_a_mig_gpu_without_slices_is_a_warning_with_both_fixes(real_matrix, monkeypatch):
    report = doctor.judge(host(monkeypatch, "mig-no-slices-535"), real_matrix)  # a capture
    mig = line(report, "mig")
    assert mig.status == WARN and "no MIG devices" in mig.message
    assert "nvidia-smi mig -i 0 -cgi" in mig.fix and "-mig 0" in mig.fix


def test_a_run_picks_a_slice_and_a_whole_mig_card_is_refused(monkeypatch):
    facts = host(monkeypatch, "mig-a100-80gb-list")
    view = gpu_choice.from_facts(facts)
    assert view.mig_enabled == (0,) and len(view.mig) == 4
    assert gpu_request.resolve("0:3", "cuda", host=view).kwargs["device_requests"][0]["DeviceIDs"] == ["0:3"]
    with pytest.raises(UsageError, match=r"GPU 0 is in MIG mode.*0:0 \(3g.40gb\)"):
        gpu_request.resolve("device=0", "cuda", host=view)


def test_mig_from_the_table_alone_knows_the_slices_by_number(real_matrix, monkeypatch):
    """The CEEMS capture: GPU 0 in MIG mode with four devices, GPU 1 whole; no `-L` was published."""
    facts = host(monkeypatch, "mig-a100x2-535")
    assert facts.nvidia.mig_enabled() == [0] and [m.index for m in facts.nvidia.mig] == [0, 1, 2, 3]
    view = gpu_choice.from_facts(facts)
    assert gpu_request.resolve("device=1", "cuda", host=view).route == "nvidia-hook"  # the whole GPU 1
    assert gpu_request.resolve("0:2", "cuda", host=view).route == "nvidia-hook"


# --- engines: Podman, rootless Docker, CDI ---------------------------------------------------

def test_podman_43_says_gpu_requests_are_refused_and_the_doctor_does_not_count_on_it(real_matrix, monkeypatch):
    facts = host(monkeypatch, "a100-535", engine_name="podman-4.3.1-debian")  # the engine recorded here
    report = doctor.judge(facts, real_matrix)
    check = line(report, "engine")
    assert check.status == WARN and "Podman 4.3.1" in check.message and "containers/podman#22645" in check.message
    assert "Podman >= 5.4 with a CDI spec" in check.fix and "NVIDIA Container Toolkit" in check.fix
    with_spec = host(monkeypatch, "a100-535", shape="cdi-nvidia", engine_name="podman-4.3.1-debian")
    cdi_line = line(doctor.judge(with_spec, real_matrix), "cdi").message
    assert "Podman 4.3.1's Docker API applies no CDI request" in cdi_line and "runtime hook" not in cdi_line


def test_podman_54_with_a_cdi_spec_passes_through_cdi(real_matrix, monkeypatch):
    facts = host(monkeypatch, "a100-535", shape="cdi-nvidia", engine_name="podman-5.4")
    assert line(doctor.judge(facts, real_matrix), "engine").status == PASS
    access = gpu_request.resolve("all", "cuda", engine=facts.engine, host=gpu_choice.from_facts(facts))
    assert access.kwargs["device_requests"][0]["DeviceIDs"] == ["nvidia.com/gpu=all"]


def test_podman_5_without_a_spec_names_the_spec_as_the_only_fix(real_matrix, monkeypatch):
    """Podman 5.8.6 (recorded): it applies CDI, so the fix is the spec, not another engine."""
    facts = host(monkeypatch, "a100-535", engine_name="podman-5.8.6-sid")
    report = doctor.judge(facts, real_matrix)
    assert line(report, "engine").status == WARN and "need an NVIDIA CDI spec" in line(report, "engine").message
    assert shape_checks.toolkit_fix(facts, "default") == f"generate an NVIDIA CDI spec: {GENERATE_FIX}"
    with pytest.raises(UsageError, match=r"^--gpus refused: Podman 5.8.6 takes GPUs through its Docker API only "
                                         r"as CDI devices.*nvidia-ctk cdi generate"):
        gpu_request.resolve("all", "cuda", engine=facts.engine, host=gpu_choice.from_facts(facts))


def test_rootless_docker_without_no_cgroups_warns_with_both_fixes_and_passes_with_it(real_matrix, monkeypatch):
    facts = host(monkeypatch, "a100-535", engine_name="docker-27-rootless")
    check = line(doctor.judge(facts, real_matrix), "engine")
    assert check.status == WARN and "bpf_prog_query(BPF_CGROUP_DEVICE)" in check.message
    assert "no-cgroups" in check.fix and "nvidia-ctk cdi generate" in check.fix
    assert shape_checks.engine_check(facts, root=str(FIXTURES / "host-shapes" / "rootless-no-cgroups")).status == PASS


def test_cdi_on_with_a_spec_sends_requests_through_cdi_and_off_says_how_to_turn_it_on(real_matrix, monkeypatch):
    on = host(monkeypatch, "a100-535", shape="cdi-nvidia", engine_name="docker-28.3-cdi")
    check = line(doctor.judge(on, real_matrix), "cdi")
    assert check.status == PASS and "nvidia.com/gpu={0, GPU-4101" in check.message
    assert "kerasenv sends GPU requests through it" in check.message
    off = host(monkeypatch, "a100-535", shape="cdi-nvidia", engine_name="docker-20.10-debian")
    assert "CDI off, so kerasenv uses NVIDIA's runtime hook" in line(doctor.judge(off, real_matrix), "cdi").message
    none = host(monkeypatch, "a100-535")
    assert line(doctor.judge(none, real_matrix), "cdi").status == INFO


def test_every_shape_line_is_in_the_json_report(real_matrix, monkeypatch):
    report = doctor.judge(host(monkeypatch, "mig-a100-80gb-list", shape="cdi-nvidia",
                               engine_name="docker-28.3-cdi"), real_matrix).as_dict()
    names = [c["name"] for c in report["host"]]
    for name in ("wsl2", "engine", "mig", "cdi"):
        assert names.count(name) == 1


# --- arm64 (Grace) ---------------------------------------------------------------------------
# GB10 / DGX Spark: a capture (ArcticTraining#345); GH200: a simulator's (SIMULATED); GB200: a
# capture inside a pod on a Grace tray (SOURCES.md). The host's CPU is set to aarch64 here: the
# recordings are nvidia-smi's only.

ARM64_IMAGES = ("jax0.12-cuda12.9", "torch2.15-cuda13.2")
MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION=0.5"


def arm64_host(monkeypatch, smi: str, **kwargs) -> doctor.HostFacts:
    from dataclasses import replace

    return replace(host(monkeypatch, smi, **kwargs), machine="aarch64")


def with_arm64_kernels(matrix, variant_id: str, sass: tuple[str, ...] | None, ptx: tuple[str, ...] = ()):
    """The matrix with `variant_id`'s arm64 kernel record replaced (CONSTRUCTED, as the test says
    why), or removed (sass None: not recorded yet), so the verdicts are tested apart from what
    images/<id>/kernel-targets-arm64.json holds today."""
    from dataclasses import replace

    from kerasenv.matrix.kernel_targets import KernelTargets

    v = matrix.get(variant_id)
    targets = None if sass is None else KernelTargets(v.backend, v.framework_version, sass, ptx)
    return replace(matrix, variants=tuple(replace(x, recorded_kernels_arm64=targets) if x is v else x
                                          for x in matrix.variants))


def test_the_matrix_has_the_arm64_images_these_tests_judge(real_matrix):
    assert tuple(v.id for v in real_matrix.variants if "linux/arm64" in v.platforms) == ARM64_IMAGES


@pytest.mark.parametrize("smi", ["gb10-580", "gh200-550", "gb200-580"])
def test_on_an_arm64_host_the_amd64_only_images_fail_in_one_line_naming_the_arm64_image(real_matrix, monkeypatch,
                                                                                       smi):
    report = doctor.judge(arm64_host(monkeypatch, smi), real_matrix)
    arch = line(report, "architecture")
    assert arch.status == PASS and "NVIDIA Grace" in arch.message
    assert "linux/arm64 images: jax0.12-cuda12.9, torch2.15-cuda13.2" in arch.message
    assert "tensorflow/tensorflow#121157" in arch.message
    v = verdicts(report)
    for vid, check in v.items():
        if vid in ARM64_IMAGES:
            continue
        assert check.status == FAIL and check.message.startswith("linux/amd64 only (aarch64 host): "), vid
        assert "\n" not in check.message + check.fix
    tf = v["tf2.21-cuda12.9"]
    assert tf.message.endswith("TensorFlow's aarch64 wheel is CPU-only (tensorflow/tensorflow#121157)")
    assert tf.fix == "use kerasenv:jax0.12-cuda12.9 or kerasenv:torch2.15-cuda13.2 (Keras 3 on JAX or PyTorch)"
    assert v["jax0.12-cpu"].message.endswith("no linux/arm64 image of it")
    assert v["jax0.12-cpu"].fix == "use kerasenv:jax0.12-cuda12.9, its backend's linux/arm64 image"
    assert "without a GPU it trains on the CPU" in v["tf2.21-cpu"].fix
    assert v["tf2.17-rocm6.3"].status == FAIL
    assert report.recommended in ARM64_IMAGES and report.gpu_usable


def test_gh200_on_550_runs_the_jax_image_and_not_pytorchs_cuda_13(real_matrix, monkeypatch):
    """GH200 (sm_90) with driver 550: PyTorch cu132 needs >= 580; JAX's CUDA 12.9 plugin loads from
    525 and runs under minor-version compatibility, with native sm_90 kernels."""
    report = doctor.judge(arm64_host(monkeypatch, "gh200-550"), real_matrix)
    v = verdicts(report)
    torch = v["torch2.15-cuda13.2"]
    assert torch.status == FAIL and "driver 550.127.05 is older than 580.65.06" in torch.message
    assert "jax0.12-cuda12.9 runs on it, with native kernels for this GPU" in torch.message
    assert v["jax0.12-cuda12.9"].status == PASS and "minor-version compatibility" in v["jax0.12-cuda12.9"].message
    assert report.recommended == "jax0.12-cuda12.9" and report.gpu_usable
    # HBM is reported: no unified-memory line, no memory setting
    assert "unified-memory" not in [c.name for c in report.host]
    assert MEM_FRACTION not in doctor.format_text(report)


def test_gb10_gets_native_kernels_from_both_arm64_images_and_pytorchs_warning_is_called_a_false_alarm(
        real_matrix, monkeypatch):
    """GB10 (sm_121, driver 580): JAX's sm_120 SASS runs there (same major, lower minor), PyTorch's
    aarch64 build has sm_121a; PyTorch warns "capability 12.1 not supported" (pytorch/pytorch#172629)."""
    report = doctor.judge(arm64_host(monkeypatch, "gb10-580"), with_arm64_kernels(
        real_matrix, "jax0.12-cuda12.9", ("sm_80", "sm_90", "sm_100", "sm_120"), ("compute_120",)))
    v = verdicts(report)
    torch = v["torch2.15-cuda13.2"]
    assert torch.status == PASS and "native kernels in torch 2.15.0" in torch.message
    assert "false alarm" in torch.message and "pytorch/pytorch#172629" in torch.message
    jax = v["jax0.12-cuda12.9"]
    assert jax.status == WARN and "native kernels in jax 0.12.0.1" in jax.message
    # Both native, both on their wheels' own driver: the newer CUDA, as on amd64 Blackwell hosts.
    assert report.recommended == "torch2.15-cuda13.2"


def test_the_arm64_verdicts_use_the_arm64_images_kernels_not_the_amd64_ones(real_matrix, monkeypatch):
    """CONSTRUCTED records: a PyTorch arm64 build without sm_12x code fails GB10 (no PTX either) and
    the JAX image becomes the pick; without any arm64 record the kernels are "not checked" (a
    WARN), never judged by the amd64 record, and no image counts as native."""
    matrix = with_arm64_kernels(real_matrix, "torch2.15-cuda13.2", ("sm_80", "sm_90", "sm_100"))
    report = doctor.judge(arm64_host(monkeypatch, "gb10-580"), matrix)
    torch = verdicts(report)["torch2.15-cuda13.2"]
    assert torch.status == FAIL and "carries no kernel it can run" in torch.message
    assert torch.fix.startswith("use kerasenv:jax0.12-cuda12.9 (native kernels for it)")
    assert report.recommended == "jax0.12-cuda12.9"

    bare = with_arm64_kernels(with_arm64_kernels(real_matrix, "torch2.15-cuda13.2", None), "jax0.12-cuda12.9", None)
    v = verdicts(doctor.judge(arm64_host(monkeypatch, "gh200-550"), bare))
    assert v["jax0.12-cuda12.9"].status == WARN
    assert "not recorded for its linux/arm64 image (kernel-targets-arm64.json)" in v["jax0.12-cuda12.9"].message
    gb200 = verdicts(doctor.judge(arm64_host(monkeypatch, "gb200-580"), bare))["torch2.15-cuda13.2"]
    assert gb200.status == WARN and "images/<id>/kernel-targets-arm64.json" in gb200.message


def test_gb200_is_recommended_an_arm64_image_with_native_sm_100_kernels(real_matrix, monkeypatch):
    report = doctor.judge(arm64_host(monkeypatch, "gb200-580"), real_matrix)
    v = verdicts(report)
    for vid in ARM64_IMAGES:
        assert v[vid].status == PASS and "compute capability 10.0, Blackwell): native kernels" in v[vid].message
    assert report.recommended in ARM64_IMAGES
    assert "sm_100" in real_matrix.get(report.recommended).kernels_for("arm64").sass


def test_an_arm64_host_without_a_gpu_trains_on_an_arm64_image(real_matrix, monkeypatch):
    """No CPU-only image is built for arm64: the pick is a CUDA image, which trains on the CPU."""
    report = doctor.judge(arm64_host(monkeypatch, "no-driver"), real_matrix)
    assert report.recommended == "jax0.12-cuda12.9" and not report.gpu_usable
    assert "no CPU-only linux/arm64 image: kerasenv:jax0.12-cuda12.9 trains on the CPU" in report.reason


def test_on_an_amd64_host_the_architecture_line_names_the_arm64_images_too(real_matrix, monkeypatch):
    arch = line(doctor.judge(host(monkeypatch, "a100-535"), real_matrix), "architecture")
    assert arch.status == PASS and "jax0.12-cuda12.9, torch2.15-cuda13.2 also linux/arm64" in arch.message


def test_without_arm64_images_an_arm64_host_is_refused_and_nothing_is_recommended(real_matrix, monkeypatch):
    from dataclasses import replace

    matrix = replace(real_matrix, variants=tuple(replace(v, arm64=None) for v in real_matrix.variants))
    report = doctor.judge(arm64_host(monkeypatch, "gb10-580"), matrix)
    arch = line(report, "architecture")
    assert arch.status == FAIL and "exec format error" in arch.message and "nvcr.io/nvidia/jax" in arch.fix
    assert all(c.status == FAIL for c in verdicts(report).values())
    assert report.recommended == "" and not report.gpu_usable
    assert doctor.format_text(report).splitlines()[-1].startswith("recommended: none (no kerasenv image for aarch64")


def test_the_gb10_is_read_as_compute_capability_121_and_its_memory_as_unknown(monkeypatch):
    facts = host(monkeypatch, "gb10-580")
    (gpu,) = facts.nvidia.gpus
    assert (gpu.name, gpu.compute_capability, gpu.memory_mib) == ("NVIDIA GB10", "12.1", None)
    assert gpu.unified_memory


def test_auto_on_an_arm64_host_picks_an_arm64_image(real_matrix, monkeypatch):
    from kerasenv.host import variant_choice

    for smi, expected in (("gb10-580", "torch2.15-cuda13.2"), ("gh200-550", "jax0.12-cuda12.9")):
        facts = arm64_host(monkeypatch, smi)
        monkeypatch.setattr(doctor, "gather", lambda client_factory: facts)
        v, reason = variant_choice.recommended(real_matrix, object())
        assert v.id == expected and "linux/arm64" in v.platforms, smi


def test_auto_on_a_cpu_without_images_is_one_line_not_a_foreign_container(real_matrix, monkeypatch):
    from dataclasses import replace

    from kerasenv.host import variant_choice

    facts = replace(host(monkeypatch, "gb10-580"), machine="riscv64")
    monkeypatch.setattr(doctor, "gather", lambda client_factory: facts)
    with pytest.raises(UsageError, match="no image to pick: no kerasenv image for riscv64"):
        variant_choice.recommended(real_matrix, object())


# --- unified memory (GB10) -------------------------------------------------------------------

def test_gb10_says_its_memory_is_shared_and_which_setting_the_jax_image_gets(real_matrix, monkeypatch):
    report = doctor.judge(arm64_host(monkeypatch, "gb10-580"), real_matrix)
    memory = line(report, "unified-memory")
    assert memory.status == INFO and "GPU 0 (NVIDIA GB10) shares the system's RAM" in memory.message
    assert MEM_FRACTION in memory.message and "marin-community/marin#2142" in memory.message
    assert "PennyLaneAI/pennylane-lightning#1357" in memory.message and '"not reported"' in memory.message
    gpu = line(report, "gpu0")
    assert "unified memory (shared with the CPU; not reported by the driver)" in gpu.message
    jax = verdicts(report)["jax0.12-cuda12.9"]
    assert jax.status == WARN and jax.message.startswith(f"works with {MEM_FRACTION}, which")
    assert "set on a unified-memory GPU (GB10)" in jax.message and "75 %" in jax.message
    assert f"pass `-e {MEM_FRACTION}` yourself (marin-community/marin#2142)" in jax.fix
    # PyTorch grows its cache on demand: no setting, and the pick is unchanged by the JAX one.
    assert MEM_FRACTION not in verdicts(report)["torch2.15-cuda13.2"].message


def test_the_memory_setting_applies_to_jax_cuda_images_only_and_with_wsl2s_own(real_matrix, monkeypatch):
    gb10 = host(monkeypatch, "gb10-580").nvidia
    linux, wsl2 = wsl.detect(FIXTURES / "host-shapes" / "linux"), wsl.detect(FIXTURES / "host-shapes" / "wsl2")
    jax = real_matrix.get("jax0.12-cuda12.9")
    assert [s.assignment for s in shape_checks.settings(jax, linux, gb10)] == [MEM_FRACTION]
    assert [s.assignment for s in shape_checks.settings(jax, wsl2, gb10)] == [ALLOCATOR, MEM_FRACTION]
    assert shape_checks.settings(jax, linux, host(monkeypatch, "gh200-550").nvidia) == ()
    for other in ("torch2.15-cuda13.2", "jax0.12-cpu", "tf2.21-cuda12.9"):
        assert shape_checks.settings(real_matrix.get(other), linux, gb10) == ()
