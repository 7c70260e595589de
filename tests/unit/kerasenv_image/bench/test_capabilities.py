"""Which precisions and XLA settings the bench measures on a device
(kerasenv_image.bench.capabilities), on the host without TensorFlow."""

from __future__ import annotations

import pytest

from kerasenv.host import nvidia_smi
from kerasenv_image.bench import capabilities

from ...conftest import REPO


@pytest.mark.parametrize("device, cc, chosen, skipped", [
    ("cpu", None, ["off"], ["bfloat16"]),  # no native bfloat16 on this CPU: emulated, slower
    ("gpu", "6.1", ["off"], ["float16", "bfloat16"]),  # Pascal: no tensor cores
    ("gpu", "7.0", ["off", "float16"], ["bfloat16"]),  # Volta
    ("gpu", "7.5", ["off", "float16"], ["bfloat16"]),  # Turing (T4)
    ("gpu", "8.0", ["off", "float16", "bfloat16"], []),  # Ampere (A100)
    ("gpu", "9.0", ["off", "float16", "bfloat16"], []),  # Hopper
    ("gpu", None, ["off"], ["float16", "bfloat16"]),  # unknown: never guessed
])
def test_auto_precision_choice(device, cc, chosen, skipped):
    got, why = capabilities.choose_precisions("auto", device, cc)
    assert got == chosen
    assert sorted(why) == sorted(skipped)


def test_skip_reasons_name_the_requirement():
    _, why = capabilities.choose_precisions("auto", "gpu", "7.5")
    assert "8.0" in why["bfloat16"] and "7.5" in why["bfloat16"]
    _, why = capabilities.choose_precisions("auto", "gpu", "6.1")
    assert "7.0" in why["float16"]


def test_explicit_precisions_are_kept_or_skipped_with_a_reason():
    assert capabilities.choose_precisions(["off", "bfloat16"], "cpu") == (["off", "bfloat16"], {})
    got, why = capabilities.choose_precisions(["float16"], "cpu")
    assert got == [] and "bfloat16" in why["float16"]
    got, why = capabilities.choose_precisions(["off", "float16", "bfloat16"], "gpu", "7.0")
    assert got == ["off", "float16"] and list(why) == ["bfloat16"]
    with pytest.raises(ValueError):
        capabilities.choose_precisions(["fp8"], "gpu", "9.0")


def test_precision_choice_from_recorded_compute_capabilities():
    """tests/fixtures/nvidia-smi/multi-gpu: TITAN V (7.0) and RTX 5880 Ada (8.9), as nvidia-smi reported them."""
    rows = nvidia_smi.parse_query_csv((REPO / "tests/fixtures/nvidia-smi/multi-gpu/query-gpu.csv").read_text())
    by_name = {r["name"]: r["compute_cap"] for r in rows}
    assert capabilities.choose_precisions("auto", "gpu", by_name["NVIDIA TITAN V"])[0] == ["off", "float16"]
    assert capabilities.choose_precisions("auto", "gpu", by_name["NVIDIA RTX 5880 Ada Generation"])[0] == \
        ["off", "float16", "bfloat16"]


@pytest.mark.parametrize("value, parsed", [("8.6", (8, 6)), ((9, 0), (9, 0)), ("12.0", (12, 0)),
                                           ("x", None), (None, None), ("8", None)])
def test_parse_cc(value, parsed):
    assert capabilities.parse_cc(value) == parsed


SAPPHIRE_RAPIDS_FLAGS = "flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
EPYC_ZEN2_FLAGS = "flags\t\t: fpu vme sse2 avx2 sha_ni clzero\n"


def test_cpu_bfloat16_is_measured_only_where_the_cpu_has_native_bfloat16():
    assert capabilities.cpu_bf16_flags(SAPPHIRE_RAPIDS_FLAGS) == ["amx_bf16", "avx512_bf16"]
    assert capabilities.cpu_bf16_flags(EPYC_ZEN2_FLAGS) == []
    got, why = capabilities.choose_precisions("auto", "cpu", cpu_bf16=["amx_bf16"])
    assert got == ["off", "bfloat16"] and list(why) == ["float16"]
    got, why = capabilities.choose_precisions("auto", "cpu", cpu_bf16=[])
    assert got == ["off"] and "--precision off,bfloat16" in why["bfloat16"]


def test_bench_skips_only_the_xla_rows_on_blackwell():
    skipped = capabilities.xla_skipped(["off", "on"], "gpu", "12.0")
    assert list(skipped) == ["on"] and "aborts the process" in skipped["on"]
    assert capabilities.xla_skipped(["off"], "gpu", "12.0") == {}
    assert capabilities.xla_skipped(["off", "on"], "cpu", None) == {}


def test_the_blackwell_xla_rule_is_tensorflows_and_torch_compile_needs_a_compiler():
    assert capabilities.xla_skipped(["off", "on"], "gpu", "12.0", "jax") == {}
    assert "C compiler" in capabilities.xla_skipped(["off", "on"], "cpu", None, "torch")["on"]
    assert capabilities.xla_skipped(["off", "on"], "cpu", None, "torch", c_compiler="/usr/bin/cc") == {}
