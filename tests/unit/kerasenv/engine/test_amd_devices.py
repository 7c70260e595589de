"""engine/amd_devices: AMD device nodes, their groups and ROCm's device order, read from a
fake host tree (scan) and from the recorded shapes in tests/fixtures/amd-hosts/ (simulated:
written from public sources, see their READMEs)."""

from __future__ import annotations

import os

import pytest

from kerasenv.engine import amd_devices
from kerasenv.engine.amd_devices import Node

from ...conftest import REPO

AMD_HOSTS = REPO / "tests" / "fixtures" / "amd-hosts"
FIXTURES = sorted(p.name for p in AMD_HOSTS.iterdir() if p.is_dir())


def host(name: str) -> amd_devices.AmdHost:
    return amd_devices.load_record(AMD_HOSTS / name / "host.json")


def fake_tree(root, *, topology: list[tuple[int, int]] | None, amd_pci: dict[str, str]):
    """A host tree: /dev/kfd, renderD128.. (one per PCI address in `amd_pci`, value the vendor),
    their /sys/class/drm links, the PCI devices, /etc/group, /sys/module/amdgpu, and KFD
    topology nodes (gpu_id, drm_render_minor)."""
    (root / "dev/dri").mkdir(parents=True)
    (root / "dev/kfd").write_text("")
    os.chmod(root / "dev/kfd", 0o660)
    for i, (pci, vendor) in enumerate(amd_pci.items()):
        name = f"renderD{128 + i}"
        (root / "dev/dri" / name).write_text("")
        device = root / "sys/bus/pci/devices" / pci
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (device / "class").write_text("0x030000\n")
        (root / "sys/class/drm" / name).mkdir(parents=True)
        (root / "sys/class/drm" / name / "device").symlink_to(device)
    (root / "etc").mkdir()
    (root / "etc/group").write_text("root:x:0:\nvideo:x:44:\nrender:x:993:\n")
    (root / "sys/module/amdgpu").mkdir(parents=True)
    for n, (gpu_id, minor) in enumerate(topology or []):
        node = root / amd_devices.TOPOLOGY / str(n)
        node.mkdir(parents=True)
        (node / "gpu_id").write_text(f"{gpu_id}\n")
        (node / "properties").write_text(f"cpu_cores_count 0\ndrm_render_minor {minor}\nlocal_mem_size 0\n")


def test_scan_reads_owner_group_mode_and_orders_gpus_by_the_kfd_topology(tmp_path):
    # node 0: the CPU (gpu_id 0); GPU 0 is the node naming renderD130, GPU 1 renderD129
    fake_tree(tmp_path, topology=[(0, 0), (4242, 130), (1717, 129)],
              amd_pci={"0000:00:02.0": "0x8086", "0000:41:00.0": "0x1002", "0000:c1:00.0": "0x1002"})
    found = amd_devices.scan(tmp_path)
    assert found.kfd.gid == os.getgid() and found.kfd.mode == 0o660 and found.kfd.path == "/dev/kfd"
    assert found.kfd.source == str(tmp_path / "dev/kfd")  # a fake root: the host side is in it
    assert found.gpus == ("/dev/dri/renderD130", "/dev/dri/renderD129") and found.order == "kfd-topology"
    assert found.node("/dev/dri/renderD129").pci == "0000:41:00.0"
    assert found.groups[993] == "render" and found.driver_loaded
    assert found.amd_pci_gpus == ("0000:41:00.0", "0000:c1:00.0")  # not Intel's


def test_without_a_topology_the_amd_render_nodes_by_minor(tmp_path):
    fake_tree(tmp_path, topology=None, amd_pci={"0000:00:02.0": "0x8086", "0000:41:00.0": "0x1002"})
    found = amd_devices.scan(tmp_path)
    assert found.gpus == ("/dev/dri/renderD129",) and found.order == "pci-vendor"


def test_a_host_without_amd_has_nothing(tmp_path):
    found = amd_devices.scan(tmp_path)
    assert (found.kfd, found.dri, found.gpus, found.has_gpu, found.driver_loaded) == (None, (), (), False, False)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_has_a_readme_naming_it_simulated_and_round_trips(name):
    readme = (AMD_HOSTS / name / "README.md").read_text()
    assert "not a capture" in readme
    recorded = host(name)
    assert amd_devices.from_record(recorded.as_record()) == recorded


def test_the_render_gid_993_of_rocm_docker_116_is_what_a_container_gets():
    h = host("ubuntu-render-993")
    assert h.gids() == [44, 993]  # all of /dev/dri: card0 (video) and renderD128 (render); kfd is render too
    assert h.gids([0]) == [993]  # GPU 0 alone: /dev/kfd and renderD128


def test_device_indexes_map_to_rocms_render_nodes_not_128_plus_n():
    h = host("igpu-first-two-amd")  # renderD128 is the integrated GPU's
    assert h.render_nodes([0]) == ["/dev/dri/renderD129"]
    assert h.render_nodes([1, 0]) == ["/dev/dri/renderD130", "/dev/dri/renderD129"]
    with pytest.raises(ValueError, match=r"0=renderD129, 1=renderD130, not 2"):
        h.render_nodes([2])
    assert amd_devices.AmdHost().render_nodes([1]) == ["/dev/dri/renderD129"]  # nothing known: as before


@pytest.mark.parametrize("node, uid, gids, ok", [
    (Node("/dev/kfd", 0, 993, 0o660), 1000, [993], True),
    (Node("/dev/kfd", 0, 993, 0o660), 1000, [44], False),  # the group is not added: no access
    (Node("/dev/kfd", 0, 0, 0o600), 1000, [0, 993], False),  # root's alone: group 0 gives nothing
    (Node("/dev/kfd", 1000, 0, 0o600), 1000, [], True),
    (Node("/dev/kfd", 0, 993, 0o666), 1000, [], True),
    (Node("/dev/kfd", 0, 993, 0o640), 1000, [993], False),  # read-only for the group
    (Node("/dev/kfd", 0, 0, 0o000), 0, [], True),  # root
])
def test_can_open_follows_owner_then_group_then_other(node, uid, gids, ok):
    assert amd_devices.can_open(node, uid, gids) is ok


def test_compose_gets_the_kfd_and_render_gids_or_a_reason():
    assert amd_devices.compose_env(host("ubuntu-render-993")) == {"KERASENV_KFD_GID": "993",
                                                                  "KERASENV_RENDER_GID": "993"}
    assert amd_devices.compose_env(host("igpu-first-two-amd"))["KERASENV_RENDER_GID"] == "110"
    with pytest.raises(ValueError, match="no AMD GPU here"):
        amd_devices.compose_env(host("driver-not-loaded"))
