"""The doctor's AMD checks and the ROCm image's verdict, per recorded AMD host shape
(tests/fixtures/amd-hosts/: simulated shapes written from public sources, not captures)."""

from __future__ import annotations

import pytest

from kerasenv.engine import amd_devices
from kerasenv.host import doctor, nvidia_smi, rocm_checks
from kerasenv.host.doctor import FAIL, INFO, PASS, WARN

from ...conftest import REPO

AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"
ROCM_IMAGE = "kerasenv:tf2.17-rocm6.3"


def facts(host: str | None, *, uid: int = 1000, images=(ROCM_IMAGE,), docker: str | None = "20.10.24",
          tools=(), cdi=()) -> doctor.HostFacts:
    amd = amd_devices.load_record(AMD_HOSTS / host / "host.json") if host else amd_devices.AmdHost()
    return doctor.HostFacts(nvidia=nvidia_smi.HostGpus(present=False), amd=amd, container_uid=uid,
                            local_images=set(images) if images is not None else None, docker_version=docker,
                            amd_tools=list(tools), amd_cdi_specs=list(cdi))


def checks(f: doctor.HostFacts) -> dict[str, doctor.Check]:
    return {c.name: c for c in doctor.host_checks(f)}


def verdict(f: doctor.HostFacts, matrix) -> doctor.Check:
    report = doctor.judge(f, matrix)
    return next(c for c in report.variants if c.name == "variant tf2.17-rocm6.3")


def test_a_host_with_the_render_gid_993_passes_and_says_what_to_add_by_hand(real_matrix):
    f = facts("ubuntu-render-993")
    c = checks(f)
    assert c["amd-driver"].status == PASS
    assert c["rocm-devices"].status == PASS and "GPU 0 renderD128 (0000:03:00.0)" in c["rocm-devices"].message
    access = c["rocm-access"]
    assert access.status == PASS and "uid 1000" in access.message
    assert "/dev/kfd group 993 (render) mode 0660" in access.message and "`--group-add 993`" in access.message
    assert verdict(f, real_matrix).status == PASS
    report = doctor.judge(f, real_matrix)
    assert report.recommended == real_matrix.default_rocm and report.gpu_usable


def test_device_numbering_is_rocms_when_another_gpu_holds_renderD128():
    c = checks(facts("igpu-first-two-amd"))
    assert "GPU 0 renderD129 (0000:41:00.0), GPU 1 renderD130 (0000:c1:00.0)" in c["rocm-devices"].message
    assert "(KFD topology)" in c["rocm-devices"].message
    assert "--group-add 110" in c["rocm-access"].message


def test_kfd_that_no_group_opens_fails_in_one_line_with_the_udev_fix(real_matrix):
    f = facts("kfd-root-0600")
    access = checks(f)["rocm-access"]
    assert access.status == FAIL
    assert access.message == ("/dev/kfd group 0 (root) mode 0600 owner uid 0: uid 1000 cannot read and write it "
                              "even with the groups kerasenv adds (993)")
    assert 'KERNEL=="kfd", GROUP="render", MODE="0660"' in access.fix and "udevadm trigger" in access.fix
    v = verdict(f, real_matrix)
    assert v.status == FAIL and v.fix == access.fix and "cannot read and write" in v.message
    assert doctor.judge(f, real_matrix).recommended == real_matrix.default_cpu
    assert checks(facts("kfd-root-0600", uid=0))["rocm-access"].status == PASS  # containers run as root there


def test_an_amd_gpu_without_the_amdgpu_module_fails_once_with_modprobe_and_dkms(real_matrix):
    f = facts("driver-not-loaded")
    c = checks(f)
    assert c["amd-driver"].status == FAIL and "0000:03:00.0" in c["amd-driver"].message
    assert "`sudo modprobe amdgpu`" in c["amd-driver"].fix and "amdgpu-dkms" in c["amd-driver"].fix
    assert "rocm-devices" not in c and "rocm-access" not in c  # one cause, one line
    assert verdict(f, real_matrix).status == FAIL and not doctor.judge(f, real_matrix).gpu_usable


def test_amdgpu_loaded_without_kfd_names_the_missing_compute_interface():
    amd = amd_devices.load_record(AMD_HOSTS / "ubuntu-render-993" / "host.json")
    f = facts("ubuntu-render-993")
    f.amd = amd_devices.AmdHost(**{**amd.__dict__, "kfd": None})
    c = checks(f)["rocm-devices"]
    assert c.status == FAIL and c.message.startswith("/dev/kfd missing") and "CONFIG_HSA_AMD" in c.fix


def test_no_amd_gpu_is_one_information_line_and_the_image_note(real_matrix):
    f = facts(None, images=())
    c = checks(f)
    assert c["rocm"].status == INFO and not {"amd-driver", "rocm-access", "amd-toolkit"} & c.keys()
    v = verdict(f, real_matrix)
    assert v.status == INFO and v.message.startswith("needs an AMD GPU")
    assert "built FROM AMD's image (rocm/tensorflow:rocm6.3.3-py3.12-tf2.17-dev): pull or build it where " \
           "Docker Hub is reachable" in v.message


def test_a_ready_amd_host_without_the_image_warns_with_build_elsewhere_then_verify(real_matrix):
    v = verdict(facts("ubuntu-render-993", images=()), real_matrix)
    assert v.status == WARN and "is not here: this image is built FROM AMD's image" in v.message
    assert v.fix == ("on a host that reaches Docker Hub: `make build VARIANT=tf2.17-rocm6.3`, then here "
                     "`make verify-gpu VARIANT=tf2.17-rocm6.3`")
    assert verdict(facts("ubuntu-render-993", images=None), real_matrix).status == PASS  # Docker not asked


@pytest.mark.parametrize("docker, tools, cdi, says", [
    ("20.10.24", (), (), ["no AMD Container Toolkit", "Docker 20.10.24 takes `--gpus` for NVIDIA only (AMD from 29.3)"]),
    ("29.3.0", ("amd-ctk at /usr/bin/amd-ctk",), ("/etc/cdi/amd.json",),
     ["AMD Container Toolkit: amd-ctk at /usr/bin/amd-ctk, CDI spec /etc/cdi/amd.json",
      "Docker 29.3.0 takes `--gpus` for AMD through CDI"]),
    ("29.4.1", ("amd-container-runtime at /usr/bin/amd-container-runtime",), (),
     ["once a CDI spec exists (`sudo amd-ctk cdi generate --output=/etc/cdi/amd.json`)"]),
    (None, (), (), ["Docker's version unknown"]),
])
def test_the_toolkit_check_says_what_is_there_and_whether_docker_takes_gpus_for_amd(docker, tools, cdi, says):
    c = checks(facts("ubuntu-render-993", docker=docker, tools=tools, cdi=cdi))["amd-toolkit"]
    assert c.status == INFO and "kerasenv passes the device nodes itself" in c.message
    for text in says:
        assert text in c.message


def test_gather_reads_the_cdi_specs_and_the_amd_facts_below_the_given_root(tmp_path, monkeypatch):
    (tmp_path / "etc/cdi").mkdir(parents=True)
    (tmp_path / "etc/cdi/amd.json").write_text('{"kind": "amd.com/gpu", "devices": []}')
    (tmp_path / "etc/cdi/nvidia.yaml").write_text("kind: nvidia.com/gpu\n")
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}" if name == "amd-ctk" else None)
    tools, specs = amd_devices.toolkit_facts(tmp_path)
    assert tools == ["amd-ctk at /usr/bin/amd-ctk"] and specs == ["/etc/cdi/amd.json"]


@pytest.mark.parametrize("version, ok", [("29.3.0", True), ("29.2.9", False), ("30.0.0-rc.1", True),
                                         ("20.10.24", False), ("", False)])
def test_docker_takes_gpus_for_amd_from_29_3(version, ok):
    assert rocm_checks.docker_takes_amd_gpus(version) is ok


def test_every_failure_is_one_line_with_a_fix():
    for host in ("kfd-root-0600", "driver-not-loaded"):
        for c in doctor.host_checks(facts(host)):
            if c.status == FAIL:
                assert "\n" not in c.message + c.fix and c.fix, c


def test_gather_takes_the_amd_facts_docker_version_and_images_from_the_given_root(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from kerasenv.engine import docker_gpus

    (tmp_path / "dev/dri").mkdir(parents=True)
    (tmp_path / "dev/kfd").write_text("")
    (tmp_path / "dev/dri/renderD128").write_text("")
    (tmp_path / "sys/module/amdgpu").mkdir(parents=True)
    from kerasenv.host import facts as facts_mod

    monkeypatch.setattr(facts_mod, "probe_nvidia", lambda exe=None: nvidia_smi.HostGpus(present=False))
    monkeypatch.setattr(docker_gpus, "ask", lambda client, image=None, **kw: docker_gpus.Answer(False, "no"))
    client = SimpleNamespace(info=lambda: {"ServerVersion": "29.3.0", "Runtimes": {"runc": {}}},
                             version=lambda: {"Version": "29.3.0", "Components": [{"Name": "Engine"}]},
                             api=SimpleNamespace(images=lambda name=None: [{"RepoTags": [ROCM_IMAGE]}, {"RepoTags": None}]),
                             volumes=SimpleNamespace(list=lambda filters: []))
    f = doctor.gather(lambda: client, root=str(tmp_path))
    assert f.amd.kfd is not None and f.amd.driver_loaded and f.docker_version == "29.3.0"
    assert f.local_images == {ROCM_IMAGE}
