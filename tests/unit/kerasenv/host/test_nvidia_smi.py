"""nvidia-smi parsing over every recorded output (R470 79-column to R550+ 91-column); the
simulator-sourced ones are listed in tests/fixtures/nvidia-smi/SIMULATED."""

from __future__ import annotations

import pytest

from kerasenv.host import nvidia_smi

from ...conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "nvidia-smi"

TABLES = {  # scenario: (driver, CUDA, GPU count, first GPU name, first GPU MiB)
    "driver-470": ("470.182.03", "11.4", 1, "Tesla V100-SXM2...", 16160),
    "driver-470-geforce": ("470.63.01", "11.4", 1, "NVIDIA GeForce ...", 16116),
    "a100-535": ("535.129.03", "12.2", 1, "NVIDIA A100-SXM4-80GB", 81920),
    # WSL2: "Driver Version" is the Windows driver's number (the user-space library says 570.124.06).
    "rtx5090-572": ("572.70", "12.8", 1, "NVIDIA GeForce RTX 5090", 32607),
    "b200-575": ("575.57.08", "12.9", 8, "NVIDIA B200", 183359),
    "h100-550": ("550.54.14", "12.4", 2, "NVIDIA H100 NVL", 95830),
    "h200-550": ("550.90.12", None, 1, None, 143771),
    "gh200-550": ("550.127.05", None, 1, None, 97871),
    "multi-gpu-h100x8": ("565.57.01", "12.7", 8, "NVIDIA H100 80GB HBM3", 81559),
    "multi-gpu-a100x4": ("555.42.02", "12.5", 4, None, None),
    "multi-gpu-a40x10": ("550.127.05", None, 10, None, None),
    "userspace-470-driver-580": ("580.95.05", None, 1, None, None),
    "mig-a100x2-535": ("535.129.03", "12.2", 2, "NVIDIA A100-PCIE-40GB", 40960),
    "mig-no-slices-535": ("535.104.05", "12.2", 1, "NVIDIA A100-SXM4-80GB", 81920),
    "gb10-580": ("580.126.09", "13.0", 1, "NVIDIA GB10", None),  # DGX Spark (arm64): memory "Not Supported"
    "gb200-580": ("580.126.20", "13.0", 1, "NVIDIA GB200", 189471),  # one GB200 of a Grace tray, in a pod
    # A real capture: the lent H200 machine, by kerasenv gpu-host-check (2026-12-04).
    "h200-580": ("580.159.04", "13.0", 1, "NVIDIA H200", 143771),
}


@pytest.mark.parametrize("scenario", sorted(TABLES))
def test_table_fixture_parses(scenario):
    driver, cuda, count, name, mib = TABLES[scenario]
    host = nvidia_smi.parse_table((FIXTURES / scenario / "nvidia-smi.txt").read_text())
    assert host.driver_version == driver
    if cuda:
        assert host.cuda_version == cuda
    assert [g.index for g in host.gpus] == list(range(count))
    if name:
        assert host.gpus[0].name == name
    if mib:
        assert host.gpus[0].memory_mib == mib


def test_every_table_fixture_is_covered():
    recorded = {p.parent.name for p in FIXTURES.glob("*/nvidia-smi.txt")}
    assert recorded == set(TABLES)


def test_table_without_driver_version_is_rejected():
    with pytest.raises(ValueError, match="Driver Version"):
        nvidia_smi.parse_table((FIXTURES / "no-driver" / "error.txt").read_text())


def test_query_csv_follows_its_own_header_order():
    rows = nvidia_smi.parse_query_csv((FIXTURES / "multi-gpu" / "query-gpu.csv").read_text())
    assert rows[1] == {"compute_cap": "8.9", "compute_mode": "Default", "driver_version": "570.86.15",
                       "name": "NVIDIA RTX 5880 Ada Generation", "index": "1"}


def test_query_csv_strips_units_from_header_and_values():
    rows = nvidia_smi.parse_query_csv("index, memory.total [MiB], compute_cap\n0, 81559 MiB, 9.0\n")
    assert rows == [{"index": "0", "memory.total": "81559", "compute_cap": "9.0"}]


def test_list_gives_full_names():
    names = nvidia_smi.parse_list((FIXTURES / "multi-gpu" / "list.txt").read_text())
    assert names == {0: "NVIDIA TITAN V", 1: "NVIDIA RTX 5880 Ada Generation"}


@pytest.mark.parametrize("scenario, needle", [
    ("no-driver", "not loaded"),
    ("nvml-mismatch", "differ"),
    ("no-nvidia-smi", "nvidia-smi failed"),
])
def test_errors_are_classified(scenario, needle):
    assert needle in nvidia_smi.classify_error((FIXTURES / scenario / "error.txt").read_text())


@pytest.mark.parametrize("name, cc", [
    ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA GH200 480GB", "9.0"), ("NVIDIA A100-SXM4-80GB", "8.0"),
    ("Tesla V100-SXM2...", "7.0"), ("Tesla T4", "7.5"), ("NVIDIA L4", "8.9"), ("NVIDIA A10G", "8.6"),
    ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA A40", "8.6"), ("NVIDIA GeForce ...", None),
    ("NVIDIA GB10", "12.1"), ("NVIDIA GB200", "10.0"),
])
def test_compute_capability_from_name(name, cc):
    assert nvidia_smi.compute_capability_from_name(name) == cc


def test_the_tables_mig_column_and_mig_devices_section_are_read():
    """A real MIG table (mahendrapaipuri/ceems docs): GPU 0 Enabled with 4 MIG devices, GPU 1 Disabled."""
    host = nvidia_smi.parse_table((FIXTURES / "mig-a100x2-535" / "nvidia-smi.txt").read_text())
    assert [g.mig_mode for g in host.gpus] == ["Enabled", "Disabled"]
    assert [(m.gpu, m.index) for m in host.mig] == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert host.mig_enabled() == [0]
    empty = nvidia_smi.parse_table((FIXTURES / "mig-no-slices-535" / "nvidia-smi.txt").read_text())
    assert empty.mig_enabled() == [0] and empty.mig == []  # "No MIG devices found"
    plain = nvidia_smi.parse_table((FIXTURES / "a100-535" / "nvidia-smi.txt").read_text())
    assert plain.mig == [] and plain.mig_enabled() == [] and plain.gpus[0].mig_mode == "Disabled"


def test_list_gives_uuids_and_the_mig_devices_under_their_gpu():
    """`nvidia-smi -L` of an A100 with four MIG devices (MortalGPU chart README, recorded)."""
    gpus, slices = nvidia_smi.parse_list_full((FIXTURES / "mig-a100-80gb-list" / "list.txt").read_text())
    assert gpus == {0: ("NVIDIA A100 80GB PCIe", "GPU-4101de38-535a-4255-ac14-a63e072d7a10")}
    assert [(m.gpu, m.index, m.profile) for m in slices] == [
        (0, 0, "3g.40gb"), (0, 1, "2g.20gb"), (0, 2, "1g.10gb"), (0, 3, "1g.10gb")]
    assert slices[1].uuid == "MIG-08bce7f3-bac7-4715-b56f-91541f15fe37"
    merged = nvidia_smi.merge(nvidia_smi.HostGpus(present=True, driver_version="535.129.03"),
                              nvidia_smi.parse_query_csv((FIXTURES / "mig-a100-80gb-list" / "query-gpu.csv").read_text()),
                              None, (FIXTURES / "mig-a100-80gb-list" / "list.txt").read_text())
    assert merged.gpus[0].uuid.startswith("GPU-4101") and len(merged.mig) == 4 and merged.mig_enabled() == [0]


# --- unified memory (GB10) -------------------------------------------------------------------

@pytest.mark.parametrize("scenario, unified", [
    ("gb10-580", [0]),  # DGX Spark (a capture): GB10, memory "Not Supported"
    ("gh200-550", []),  # GH200 (a simulator's): its HBM is reported, the Grace LPDDR5x is extra
    ("gb200-580", []),  # GB200 (a capture): HBM reported
    ("h200-580", []),
])
def test_a_unified_memory_gpu_is_the_gb10_whose_memory_the_driver_does_not_report(scenario, unified):
    host = nvidia_smi.parse_table((FIXTURES / scenario / "nvidia-smi.txt").read_text())
    host = nvidia_smi.merge(host, None, None)  # the compute capability from the name table
    assert host.unified_memory() == unified


def test_both_signs_are_needed_for_unified_memory():
    """The model alone (a GB10 whose driver one day reports memory) or a missing reading alone
    (a discrete GPU on an old nvidia-smi) is not unified memory."""
    assert nvidia_smi.Gpu(0, "NVIDIA GB10", memory_mib=None, compute_capability="12.1").unified_memory
    assert nvidia_smi.Gpu(0, "NVIDIA GB10", memory_mib=None).unified_memory  # by name, cc unknown
    assert not nvidia_smi.Gpu(0, "NVIDIA GB10", memory_mib=122000, compute_capability="12.1").unified_memory
    assert not nvidia_smi.Gpu(0, "NVIDIA GB100", memory_mib=None).unified_memory
    assert not nvidia_smi.Gpu(0, "NVIDIA GeForce ...", memory_mib=None, compute_capability="8.6").unified_memory
    assert nvidia_smi.HostGpus(present=True, error="x", gpus=[nvidia_smi.Gpu(0, "NVIDIA GB10")]).unified_memory() == []


def test_a_csv_memory_placeholder_leaves_the_memory_unknown():
    """How GB10's --query-gpu reads memory.total was not seen: "[N/A]" is the driver's
    placeholder for a value it cannot give (gpu_sampler's list), so it is read as unknown."""
    rows = nvidia_smi.parse_query_csv("index, name, driver_version, memory.total [MiB], compute_cap\n"
                                      "0, NVIDIA GB10, 580.126.09, [N/A], 12.1\n")
    host = nvidia_smi.merge(nvidia_smi.HostGpus(present=True, driver_version="580.126.09"), rows, None)
    assert host.gpus[0].memory_mib is None and host.gpus[0].compute_capability_source == "nvidia-smi"
    assert host.unified_memory() == [0]
