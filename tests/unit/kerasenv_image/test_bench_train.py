"""scripts/bench_train.py (runs inside the images): its pure parts, on the host, no TensorFlow."""

from __future__ import annotations

import importlib.util

import pytest

from kerasenv.host import nvidia_smi

from ..conftest import REPO

spec = importlib.util.spec_from_file_location("bench_train", REPO / "scripts" / "bench_train.py")
bench_train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_train)


def test_the_script_does_not_import_tensorflow_at_module_level():
    source = (REPO / "scripts" / "bench_train.py").read_text()
    top = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert not any("tensorflow" in line or "keras" in line or "numpy" in line for line in top)


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
    got, why = bench_train.choose_precisions("auto", device, cc)
    assert got == chosen
    assert sorted(why) == sorted(skipped)


def test_skip_reasons_name_the_requirement():
    _, why = bench_train.choose_precisions("auto", "gpu", "7.5")
    assert "8.0" in why["bfloat16"] and "7.5" in why["bfloat16"]
    _, why = bench_train.choose_precisions("auto", "gpu", "6.1")
    assert "7.0" in why["float16"]


def test_explicit_precisions_are_kept_or_skipped_with_a_reason():
    assert bench_train.choose_precisions(["off", "bfloat16"], "cpu") == (["off", "bfloat16"], {})
    got, why = bench_train.choose_precisions(["float16"], "cpu")
    assert got == [] and "bfloat16" in why["float16"]
    got, why = bench_train.choose_precisions(["off", "float16", "bfloat16"], "gpu", "7.0")
    assert got == ["off", "float16"] and list(why) == ["bfloat16"]
    with pytest.raises(ValueError):
        bench_train.choose_precisions(["fp8"], "gpu", "9.0")


def test_precision_choice_from_recorded_compute_capabilities():
    """tests/fixtures/nvidia-smi/multi-gpu: TITAN V (7.0) and RTX 5880 Ada (8.9), as nvidia-smi reported them."""
    rows = nvidia_smi.parse_query_csv((REPO / "tests/fixtures/nvidia-smi/multi-gpu/query-gpu.csv").read_text())
    by_name = {r["name"]: r["compute_cap"] for r in rows}
    assert bench_train.choose_precisions("auto", "gpu", by_name["NVIDIA TITAN V"])[0] == ["off", "float16"]
    assert bench_train.choose_precisions("auto", "gpu", by_name["NVIDIA RTX 5880 Ada Generation"])[0] == \
        ["off", "float16", "bfloat16"]


@pytest.mark.parametrize("value, parsed", [("8.6", (8, 6)), ((9, 0), (9, 0)), ("12.0", (12, 0)),
                                           ("x", None), (None, None), ("8", None)])
def test_parse_cc(value, parsed):
    assert bench_train.parse_cc(value) == parsed


def test_steady_rate_times_only_the_steps_after_the_warm_up():
    # step 0 (first step) ends at 10.0, warm-up steps 1-3, then 4 timed steps of 0.25 s
    ends = [10.0, 10.5, 10.6, 11.0, 11.25, 11.5, 11.75, 12.0]
    rate = bench_train.steady_rate(batch_size=64, step_end_times=ends, warmup_steps=3)
    assert rate["timed_steps"] == 4 and rate["timed_seconds"] == pytest.approx(1.0)
    assert rate["samples_per_second"] == pytest.approx(256.0)
    with pytest.raises(ValueError):
        bench_train.steady_rate(64, ends[:4], warmup_steps=3)  # no timed step at all


def test_list_parsers():
    assert bench_train.parse_batch_sizes("1024,32,32,128") == [32, 128, 1024]
    for bad in ("", "0", "32,abc", "100000"):
        with pytest.raises(ValueError):
            bench_train.parse_batch_sizes(bad)
    assert bench_train.parse_list("mlp,conv,mlp", bench_train.MODELS, "models") == ["mlp", "conv"]
    with pytest.raises(ValueError):
        bench_train.parse_list("resnet", bench_train.MODELS, "models")


@pytest.mark.parametrize("argv", [["--models", "resnet"], ["--batch-sizes", "x"], ["--jit", "maybe"],
                                  ["--precision", "int8"], ["--min-steps", "1"], ["--time-box", "-1"]])
def test_bad_arguments_exit_2_before_tensorflow_is_imported(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_train.main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_model_descriptions_state_the_parameter_counts_of_the_keras_examples():
    # conv: 320 + 18,496 + 16,010; mlp: 401,920 + 262,656 + 5,130
    assert "34,826" in bench_train.MODEL_INFO["conv"] and "669,706" in bench_train.MODEL_INFO["mlp"]


SAPPHIRE_RAPIDS_FLAGS = "flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n"
EPYC_ZEN2_FLAGS = "flags\t\t: fpu vme sse2 avx2 sha_ni clzero\n"


def test_cpu_bfloat16_is_measured_only_where_the_cpu_has_native_bfloat16():
    assert bench_train.cpu_bf16_flags(SAPPHIRE_RAPIDS_FLAGS) == ["amx_bf16", "avx512_bf16"]
    assert bench_train.cpu_bf16_flags(EPYC_ZEN2_FLAGS) == []
    got, why = bench_train.choose_precisions("auto", "cpu", cpu_bf16=["amx_bf16"])
    assert got == ["off", "bfloat16"] and list(why) == ["float16"]
    got, why = bench_train.choose_precisions("auto", "cpu", cpu_bf16=[])
    assert got == ["off"] and "--precision off,bfloat16" in why["bfloat16"]
