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
])
def test_compute_capability_from_name(name, cc):
    assert nvidia_smi.compute_capability_from_name(name) == cc
