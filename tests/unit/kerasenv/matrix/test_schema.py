"""images/matrix.toml: the committed file loads; bad inputs fail with one precise line."""

from __future__ import annotations

import dataclasses

import pytest

from kerasenv.matrix import schema as matrix
from kerasenv.errors import EXIT_USAGE, MatrixError, UsageError

CPU = "variant 'tf2.21-cpu'"
GPU = "variant 'tf2.21-cuda12.9'"
JAX = "variant 'jax0.12-cuda12.9'"
TORCH = "variant 'torch2.15-cuda13.2'"
TF217 = "variant 'tf2.17-cuda12.3'"
TF220 = "variant 'tf2.20-cuda12.5'"
TF215 = "variant 'tf2.15-cuda12.2'"
ROCM = "variant 'tf2.17-rocm6.3'"
CPU_ID = 'id = "tf2.21-cpu"\n'
GPU_ID = 'id = "tf2.21-cuda12.9"\n'


def load_error(path) -> str:
    """Load a matrix that must be rejected; return its one-line message."""
    with pytest.raises(MatrixError) as info:
        matrix.load(path)
    assert info.value.exit_code == EXIT_USAGE
    message = info.value.message
    assert "\n" not in message, message
    assert str(path) in message
    return message


# --- the committed matrix --------------------------------------------------------------

def test_committed_matrix_loads_with_unique_ids(real_matrix):
    assert len(real_matrix.variants) >= 7
    assert len(set(real_matrix.ids)) == len(real_matrix.ids)


def test_every_variant_has_a_generated_folder(real_matrix, repo_root):
    from kerasenv.images.generate import BUILD_DIR, TEMPLATES_DIR

    shared = {matrix.IN_IMAGE_DIR, TEMPLATES_DIR, BUILD_DIR}
    folders = {p.name for p in (repo_root / "images").iterdir() if p.is_dir() and p.name not in shared}
    assert folders == set(real_matrix.ids)


@pytest.mark.parametrize("key, family", [
    ("default_gpu", "cuda"), ("default_cpu", "cpu"), ("default_rocm", "rocm"),
])
def test_defaults_point_to_variants_of_the_right_family(real_matrix, key, family):
    assert real_matrix.get(getattr(real_matrix, key)).family == family


def test_committed_defaults_are_the_newest_releases(real_matrix):
    assert real_matrix.default_gpu == "tf2.21-cuda12.9"
    assert real_matrix.default_cpu == "tf2.21-cpu"


def test_get_unknown_id_lists_the_valid_ids(real_matrix):
    with pytest.raises(UsageError) as info:
        real_matrix.get("nope")
    assert all(i in info.value.message for i in real_matrix.ids)


def test_cuda_variants_carry_tested_stack_and_wheels(real_matrix):
    for v in real_matrix.variants:
        if v.family != "cuda":
            assert v.cuda_wheels() == {} and v.min_driver is None
            continue
        wheels = v.cuda_wheels()
        assert wheels[f"nvidia-cudnn-cu{v.cuda.split('.')[0]}"] == v.cudnn
        assert wheels[f"nvidia-nccl-cu{v.cuda.split('.')[0]}"] == v.nccl
        assert v.compute_capabilities or v.backend != "tensorflow"


@pytest.mark.parametrize("family, package", [
    ("cpu", "tensorflow-cpu"), ("cuda", "tensorflow"), ("rocm", "tensorflow-rocm"),
])
def test_tensorflow_package_follows_family(real_matrix, family, package):
    assert {v.tensorflow_package for v in real_matrix.variants if v.family == family} == {package}


# --- bad matrices ------------------------------------------------------------------------

BAD_VARIANTS = [
    pytest.param('python = "3.13"', "python = 3.13", CPU, "'python'", "must be a str",
                 id="python-as-float"),
    pytest.param('family = "cpu"', 'family = "tpu"', CPU, "'family'", "unknown family",
                 id="unknown-family"),
    pytest.param(CPU_ID, CPU_ID + 'colour = "red"\n', CPU, "'colour'", "unknown field",
                 id="unknown-field"),
    pytest.param(CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\ntensorflow = "2.21.0"\n',
                 CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\n',
                 CPU, "'tensorflow'", "missing", id="missing-required-field"),
    pytest.param(CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\n', CPU_ID + 'family = "cpu"\n',
                 CPU, "'backend'", "missing", id="missing-backend"),
    pytest.param(CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\n', CPU_ID + 'family = "cpu"\nbackend = "mxnet"\n',
                 CPU, "'backend'", "unknown backend", id="unknown-backend"),
    pytest.param(CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\n',
                 CPU_ID + 'family = "cpu"\nbackend = "tensorflow"\njax = "0.12.0.1"\n',
                 CPU, "'jax'", "not allowed for backend", id="other-backends-release"),
    pytest.param('jax = "0.12.0.1"', 'jax = "0.9.9"', JAX, "'jax'", "not in backend_releases.py",
                 id="unknown-jax-release"),
    pytest.param('torch = "2.15.0"\nkeras = "3.15.1"', 'torch = "2.15.0"\nkeras = "2.15.0"', TORCH, "'keras'",
                 "needs an exact Keras 3 release", id="torch-with-keras-2"),
    pytest.param('cuda = "13.2"\ncudnn = "9.26.0.51"', 'cuda = "13.2"\ncudnn = "9.24.0.43"', TORCH, "'cuda'",
                 "pins CUDA 13.2 / cuDNN 9.26.0.51", id="torch-with-another-cudnn"),
    pytest.param(CPU_ID, CPU_ID + 'cuda = "12.5"\n', CPU, "'cuda'", "not allowed",
                 id="cuda-field-on-cpu"),
    pytest.param('cudnn = "9.24.0.43"', 'cudnn = "8.9.7.29"', GPU, "'cudnn'",
                 "no wheel set known for CUDA 12.9 / cuDNN 8.9.7.29", id="tf2.21-with-cudnn8"),
    pytest.param('cudnn = "9.3.0.75"', 'cudnn = "8.9.7.29"', TF220, "'cudnn'",
                 "pin the tested stack, or add gpu_evidence", id="tf2.20-with-cudnn8-no-evidence"),
    pytest.param('cuda = "12.3"', 'cuda = "12.5"', TF217, "'cuda'", "12.5",
                 id="tf2.17-with-cuda12.5"),
    pytest.param('nccl = "2.19.3"', 'nccl = "2.19.4"', TF217, "'nccl'", "==2.19.3",
                 id="tf2.17-nccl-not-the-exact-pin"),
    pytest.param('nccl = "2.30.7"', 'nccl = "2.26.0"', GPU, "'nccl'", ">=2.27.7",
                 id="tf2.21-nccl-below-floor"),
    pytest.param('nccl = "2.30.7"', 'nccl = "3.0.1"', GPU, "'nccl'", "<3.0",
                 id="tf2.21-nccl-3"),
    pytest.param('keras = "3.15.1"', 'keras = "2.15.0"', CPU, "'keras'", "Keras 3",
                 id="tf2.21-with-keras2"),
    pytest.param('keras = "2.15.0"', 'keras = "3.6.0"', TF215, "'keras'", "Keras 2",
                 id="tf2.15-with-keras3"),
    pytest.param('keras = "2.15.0"', 'keras = "2.14.0"', TF215, "'keras'", "2.15.x",
                 id="tf2.15-with-keras2.14"),
    pytest.param('keras = "3.15.1"', 'keras = "3.15"', CPU, "'keras'", "exact",
                 id="keras-not-exact"),
    pytest.param('python = "3.13"', 'python = "3.12"', CPU, "'python'", "provides Python 3.13",
                 id="python-not-from-bookworm"),
    pytest.param('tensorflow = "2.21.0"', 'tensorflow = "2.22.0"', CPU, "'tensorflow'",
                 "no tested-build entry", id="unknown-tf-release"),
    pytest.param('tensorflow = "2.17.0"', 'tensorflow = "2.18.0"', ROCM, "'tensorflow'",
                 "not validated on ROCm 6.3.3", id="tf-not-validated-on-rocm"),
    pytest.param('rocm = "6.3.3"', 'rocm = "5.7.1"', ROCM, "'rocm'", "no TensorFlow support",
                 id="unknown-rocm"),
    pytest.param('id = "tf2.20-cuda12.5"', 'id = "tf2.21-cuda12.9"', GPU, "'id'", "duplicate id",
                 id="duplicate-id"),
    pytest.param(CPU_ID, 'id = "TF2.21-CPU"\n', "variant 'TF2.21-CPU'", "'id'", "Docker tag",
                 id="id-not-a-docker-tag"),
    pytest.param("size_budget_mb = 2000", "size_budget_mb = 0", CPU, "'size_budget_mb'",
                 "positive", id="size-budget-zero"),
    pytest.param('notes = "CPU only: laptops and CI"', 'notes = "CPU | laptops"', CPU, "'notes'",
                 "Markdown table cell", id="notes-break-the-table"),
]


@pytest.mark.parametrize("old, new, entry, field, reason", BAD_VARIANTS)
def test_bad_variant_is_rejected_naming_file_entry_and_field(write_matrix, old, new, entry,
                                                              field, reason):
    message = load_error(write_matrix(old, new))
    assert f"{entry}, field {field}:" in message
    assert reason in message


@pytest.mark.parametrize("old, new, where, reason", [
    pytest.param('default_gpu = "tf2.21-cuda12.9"', 'default_gpu = "tf2.21-cpu"', "default_gpu",
                 "expected cuda", id="default-gpu-is-cpu"),
    pytest.param('default_cpu = "tf2.21-cpu"', 'default_cpu = "tf9-cpu"', "default_cpu",
                 "not a variant id", id="default-cpu-unknown"),
    pytest.param("schema_version = 1", "schema_version = 2", "schema_version", "expected 1",
                 id="schema-version"),
    pytest.param('source = "https://', 'source = "http://', "project, field 'source'", "https://",
                 id="project-source-not-https"),
])
def test_bad_top_level_key_is_rejected(write_matrix, old, new, where, reason):
    message = load_error(write_matrix(old, new))
    assert f": {where}: " in message
    assert reason in message


def test_nccl_floor_accepts_a_newer_2x_release(write_matrix):
    loaded = matrix.load(write_matrix('nccl = "2.27.7"', 'nccl = "2.28.3"'))
    assert loaded.get("tf2.20-cuda12.5").nccl == "2.28.3"


# --- CUDA stacks other than TF's tested one: GPU evidence required ------------------------

EVIDENCE = ('gpu_evidence = { source = "https://github.com/aws/deep-learning-containers/pull/6418", '
            'gpu = "NVIDIA A10G (the failure reproduced on T4, A10G, L4)", date = "2026-07-16", '
            'ran = "TF 2.21 Conv2D model.fit() under XLA with CUDA 12.9.1, cuDNN 9.24.0.43, NCCL 2.30.7" }\n')
OVERRIDE_217 = 'cuda = "12.9"\ncudnn = "9.24.0.43"\nnccl = "2.19.3"\n' + EVIDENCE


def test_the_default_gpu_image_is_a_gpu_verified_override_with_its_source(real_matrix):
    v = real_matrix.get(real_matrix.default_gpu)
    assert v.is_override and v.provenance.kind == "gpu-verified-override"
    assert (v.cuda, v.cudnn, v.nccl) == ("12.9", "9.24.0.43", "2.30.7")
    assert v.provenance.source == "https://github.com/aws/deep-learning-containers/pull/6418"
    assert "A10G" in v.provenance.gpu and v.provenance.date == "2026-07-16"
    # Every wheel of the image comes from the override's CUDA 12.9.1 set, not TF's 12.5.
    assert v.cuda_wheels()["nvidia-cuda-runtime-cu12"] == "12.9.79"
    assert v.tested_stack.cuda == "12.5"


def test_every_other_cuda_variant_is_tensorflows_tested_stack(real_matrix):
    for v in real_matrix.variants:
        if v.family == "cuda" and v.backend != "tensorflow":
            # JAX and PyTorch publish no tested configurations: their own GPU CI is the evidence.
            assert v.provenance.kind == f"{v.backend}-gpu-ci" and v.gpu_evidence is not None
            assert v.cuda_stack is v.backend_release.stack
        elif v.family == "cuda" and not v.is_override:
            assert v.provenance.kind == "tensorflow-tested"
            assert v.gpu_evidence is None
            assert v.provenance.source == matrix.TF_TESTED_SOURCE
            assert (v.cuda, v.cudnn) == (v.tested_stack.cuda, v.tested_stack.cudnn)
        elif v.family != "cuda":
            assert v.provenance is None


@pytest.mark.parametrize("old, new, entry, field, reason", [
    pytest.param(EVIDENCE, "", GPU, "'cuda'", "pin the tested stack, or add gpu_evidence",
                 id="override-without-evidence"),
    pytest.param('source = "https://github.com/aws', 'source = "http://github.com/aws', GPU,
                 "'gpu_evidence'", "https:// URL", id="evidence-source-not-https"),
    pytest.param('gpu = "NVIDIA A10G (the failure reproduced on T4, A10G, L4)", ', "", GPU,
                 "'gpu_evidence'", "'gpu' is missing", id="evidence-without-gpu"),
    pytest.param('gpu = "NVIDIA A10G (the failure reproduced on T4, A10G, L4)"', 'gpu = "  "', GPU,
                 "'gpu_evidence'", "'gpu' is missing or empty", id="evidence-gpu-blank"),
    pytest.param('date = "2026-07-16"', 'date = "16/07/2026"', GPU, "'gpu_evidence'", "YYYY-MM-DD",
                 id="evidence-date-not-iso"),
    pytest.param('date = "2026-07-16"', 'date = "2999-01-01"', GPU, "'gpu_evidence'", "in the future",
                 id="evidence-date-in-the-future"),
    pytest.param('date = "2026-07-16"', 'date = "2026-07-16", url = "x"', GPU, "'gpu_evidence'",
                 "unknown key 'url'", id="evidence-unknown-key"),
    pytest.param('cuda = "12.3"\ncudnn = "8.9.7.29"\nnccl = "2.19.3"\n', OVERRIDE_217, TF217, "'cuda'",
                 "pins that exactly", id="override-where-and-cuda-is-exact"),
    pytest.param('cuda = "12.9"', 'cuda = "12.8"', GPU, "'cuda'", "no wheel set known for CUDA 12.8",
                 id="override-stack-unknown"),
    pytest.param('notes = "CPU only: laptops and CI"', 'notes = "CPU"\n' + EVIDENCE, CPU,
                 "'gpu_evidence'", "not allowed for family 'cpu'", id="evidence-on-cpu"),
])
def test_a_stack_override_needs_complete_gpu_evidence(write_matrix, old, new, entry, field, reason):
    message = load_error(write_matrix(old, new))
    assert f"{entry}, field {field}:" in message
    assert reason in message


def test_evidence_may_back_a_tested_stack_too(write_matrix):
    # Extra evidence on TF's own stack is shown instead of the generic TF-table provenance.
    loaded = matrix.load(write_matrix('nccl = "2.19.3"\n', 'nccl = "2.19.3"\n' + EVIDENCE))
    v = loaded.get("tf2.17-cuda12.3")
    assert not v.is_override and v.provenance.kind == "tensorflow-tested, gpu-verified"
    assert v.provenance.source.startswith("https://github.com/aws/")


def test_unmodified_copy_loads(write_matrix, real_matrix):
    assert matrix.load(write_matrix(text=real_matrix.path.read_text())).ids == real_matrix.ids


def test_invalid_toml_is_rejected(write_matrix, matrix_text):
    assert "not valid TOML" in load_error(write_matrix(text=matrix_text + "\n[[variant]\n"))


def test_missing_file_is_rejected(tmp_path):
    assert "not found" in load_error(tmp_path / "absent.toml")


def test_minimal_matrix_without_variants_is_rejected(write_matrix):
    message = load_error(write_matrix(text="schema_version = 1\n"))
    assert "no [[variant]] entries" in message


# --- [jupyter]: the JupyterLab flavour ------------------------------------------------------

JUPYTER_TABLE = '[jupyter]\njupyterlab = "4.6.6"\nadded_size_budget_mb = 250\n'


def test_committed_jupyter_table_gives_every_cpu_and_cuda_variant_a_flavour(real_matrix):
    assert real_matrix.jupyter == matrix.Jupyter(jupyterlab="4.6.6", added_size_budget_mb=250)
    flavoured = real_matrix.with_jupyter()
    assert [v.id for v in flavoured] == [v.id for v in real_matrix.variants if v.family in ("cpu", "cuda")]
    assert "tf2.17-rocm6.3" not in [v.id for v in flavoured]
    assert real_matrix.get("tf2.21-cpu").jupyter_ref == "kerasenv:tf2.21-cpu-jupyter"
    assert all(v.jupyter_ref == f"{v.image_ref}-jupyter" for v in real_matrix.variants)


def test_a_matrix_without_a_jupyter_table_has_no_flavour(write_matrix):
    loaded = matrix.load(write_matrix(JUPYTER_TABLE, ""))
    assert loaded.jupyter is None and loaded.with_jupyter() == []


def test_jupyter_table_with_other_values_loads(write_matrix):
    loaded = matrix.load(write_matrix(JUPYTER_TABLE, '[jupyter]\njupyterlab = "4.10.12"\nadded_size_budget_mb = 1\n'))
    assert (loaded.jupyter.jupyterlab, loaded.jupyter.added_size_budget_mb) == ("4.10.12", 1)


@pytest.mark.parametrize("new, where, reason", [
    pytest.param('jupyterlab = "4.6"', "jupyter, field 'jupyterlab'", "exact release", id="lab-not-exact"),
    pytest.param('jupyterlab = ">=4.6.6"', "jupyter, field 'jupyterlab'", "exact release", id="lab-a-range"),
    pytest.param('jupyterlab = "latest"', "jupyter, field 'jupyterlab'", "'latest'", id="lab-latest"),
    pytest.param('jupyterlab = "4.6.6rc1"', "jupyter, field 'jupyterlab'", "exact release", id="lab-pre-release"),
    pytest.param("jupyterlab = 4.6", "jupyter, field 'jupyterlab'", "got 4.6", id="lab-a-float"),
    pytest.param("", "jupyter, field 'jupyterlab'", "got None", id="lab-missing"),
])
def test_bad_jupyterlab_release_is_rejected(write_matrix, new, where, reason):
    message = load_error(write_matrix('jupyterlab = "4.6.6"', new))
    assert f": {where}: " in message and reason in message


@pytest.mark.parametrize("new, reason", [
    pytest.param("added_size_budget_mb = 0", "got 0", id="zero"),
    pytest.param("added_size_budget_mb = -5", "got -5", id="negative"),
    pytest.param('added_size_budget_mb = "250"', "got '250'", id="a-string"),
    pytest.param("added_size_budget_mb = 250.5", "got 250.5", id="a-float"),
    pytest.param("added_size_budget_mb = true", "got True", id="a-bool"),
    pytest.param("", "got None", id="missing"),
])
def test_bad_added_size_budget_is_rejected(write_matrix, new, reason):
    message = load_error(write_matrix("added_size_budget_mb = 250", new))
    assert ": jupyter, field 'added_size_budget_mb': must be a positive integer" in message
    assert reason in message


def test_unknown_jupyter_field_is_rejected(write_matrix):
    message = load_error(write_matrix("added_size_budget_mb = 250\n",
                                      "added_size_budget_mb = 250\nnotebook = \"7.0.0\"\nport = 8888\n"))
    assert ": jupyter: unknown field(s) notebook, port" in message


def test_jupyter_that_is_not_a_table_is_rejected(write_matrix):
    assert ": jupyter: must be a table" in load_error(write_matrix(JUPYTER_TABLE, 'jupyter = "4.6.6"\n'))


# --- [profiler]: the XProf TensorBoard plugin in every cpu/cuda image ----------------------

PROFILER_TABLE = '[profiler]\ntensorboard_plugin_profile = "2.24.2"\n'


def test_committed_profiler_table_puts_the_plugin_in_every_cpu_and_cuda_variant(real_matrix):
    for v in real_matrix.variants:
        assert v.profile_plugin == (None if v.family == "rocm" else "2.24.2"), v.id


def test_a_matrix_without_a_profiler_table_has_no_plugin(write_matrix):
    loaded = matrix.load(write_matrix(PROFILER_TABLE, ""))
    assert all(v.profile_plugin is None for v in loaded.variants)


@pytest.mark.parametrize("new, reason", [
    pytest.param('tensorboard_plugin_profile = "2.24"', "exact release", id="not-exact"),
    pytest.param('tensorboard_plugin_profile = ">=2.24.2"', "exact release", id="a-range"),
    pytest.param("tensorboard_plugin_profile = 2.24", "got 2.24", id="a-float"),
    pytest.param("", "got None", id="missing"),
])
def test_bad_profile_plugin_release_is_rejected(write_matrix, new, reason):
    message = load_error(write_matrix('tensorboard_plugin_profile = "2.24.2"', new))
    assert ": profiler, field 'tensorboard_plugin_profile': " in message and reason in message


def test_unknown_profiler_field_is_rejected(write_matrix):
    message = load_error(write_matrix(PROFILER_TABLE, PROFILER_TABLE + "xprof = \"2.24.2\"\n"))
    assert ": profiler: unknown field(s) xprof" in message


# --- [keras_tools]: tf.data/TensorBoard beside JAX and PyTorch, grain, plot_model, export -----

def test_committed_keras_tools_say_what_each_image_offers(real_matrix):
    """The rows of issue 30's table per image: every cpu/cuda image has the tf.data utilities, the
    TensorBoard callback and plot_model; grain and ONNX follow the Keras release, SavedModel the
    backend (PyTorch's needs torch_xla, which PyPI has for torch 2.9 only)."""
    not_offered = {}
    for v in real_matrix.variants:
        if v.family == "rocm":
            assert v.keras_tools is None, v.id
            continue
        offers = v.keras_tools.offers(v)
        assert [k for k in ("image_dataset", "text_dataset", "audio_dataset", "timeseries", "tensorboard",
                            "plot_model") if offers[k] is not None] == [], v.id
        not_offered[v.id] = sorted(k for k, why in offers.items() if why is not None)
    assert not_offered == {
        "tf2.21-cpu": [], "tf2.21-cuda12.9": [], "tf2.20-cuda12.5": [],
        # JAX 0.12: TF 2.21 cannot read its StableHLO (keras_tools.py); ONNX through jax2onnx and flax 0.12.12
        "jax0.12-cuda12.9": ["saved_model"], "jax0.12-cpu": ["saved_model"],
        "torch2.15-cuda13.2": ["saved_model"],
        "tf2.17-cuda12.3": ["grain", "onnx"], "tf2.15-cuda12.2": ["grain", "onnx"], "tf2.14-cuda11.8": ["grain", "onnx"],
    }
    torch = real_matrix.get("torch2.15-cuda13.2")
    assert "torch_xla" in torch.keras_tools.offers(torch)["saved_model"]
    assert "Keras >= 3.12" in real_matrix.get("tf2.17-cuda12.3").keras_tools.offers(real_matrix.get("tf2.17-cuda12.3"))["grain"]


def test_onnx_exporter_follows_backend_and_keras_release(real_matrix):
    tools = real_matrix.get("jax0.12-cpu").keras_tools
    exporter = {v.id: tools.onnx_exporter(v) for v in real_matrix.debian_based}
    assert exporter["tf2.21-cpu"] == "tf2onnx" and exporter["jax0.12-cpu"] == "jax2onnx"
    assert exporter["torch2.15-cuda13.2"] == "onnxscript"
    # Keras >= 3.14 on JAX 0.10.2 (the retired image) exported with jax2onnx and no flax pin of ours;
    # before 3.14 through jax2tf and tf2onnx. JAX 0.12: jax2onnx with flax 0.12.12 pinned beside it.
    jax_0_10 = dataclasses.replace(real_matrix.get("jax0.12-cpu"), jax="0.10.2")
    assert tools.onnx_exporter(jax_0_10) == "jax2onnx" and tools.saved_model(jax_0_10)
    assert not any(r.startswith("flax==") for r in tools.requirements(jax_0_10))
    old_keras = dataclasses.replace(jax_0_10, keras="3.13.0")
    assert tools.onnx_exporter(old_keras) == "tf2onnx"
    jax = real_matrix.get("jax0.12-cpu")
    why = jax.keras_tools.offers(jax)
    assert why["onnx"] is None
    assert "flax==0.12.12" in tools.requirements(jax)
    assert "StableHLO 1.13.7" in why["saved_model"] and "JAX 0.12.0.1" in why["saved_model"]


def test_a_matrix_without_keras_tools_adds_none(write_matrix, matrix_text):
    start = matrix_text.index("[keras_tools]")
    end = matrix_text.index("[project]")
    loaded = matrix.load(write_matrix(matrix_text[start:end], ""))
    assert all(v.keras_tools is None for v in loaded.variants)


@pytest.mark.parametrize("old, new, reason", [
    pytest.param('grain = "0.2.18"', 'grain = "0.2"', None, id="grain-ok-two-parts"),
    pytest.param('grain = "0.2.18"', 'grain = ">=0.2"', "field 'grain': must be an exact release", id="grain-range"),
    pytest.param('pydot = "4.0.1"', "", "field 'pydot': must be an exact release like \"1.2.3\", got None",
                 id="pydot-missing"),
    pytest.param('pydot = "4.0.1"', 'pydot = "4.0.1"\nonnxruntime = "1.32.0"', "unknown field(s) onnxruntime",
                 id="unknown-field"),
    pytest.param('tensorflow_cpu = "2.21.0"', 'tensorflow_cpu = "2.20.0"',
                 "2.20.0 is not the release of the TensorFlow CPU image(s) (2.21.0)", id="tf-cpu-not-the-tf-images"),
])
def test_bad_keras_tools_are_rejected(write_matrix, old, new, reason):
    path = write_matrix(old, new)
    if reason is None:
        assert matrix.load(path).get("jax0.12-cpu").keras_tools.grain == "0.2"
        return
    message = load_error(path)
    assert ": keras_tools" in message and reason in message, message


def test_a_jax_or_torch_stack_needs_its_gpu_evidence(write_matrix):
    text = (REPO_MATRIX := matrix.DEFAULT_MATRIX).read_text(encoding="utf-8")
    start = text.index('id = "torch2.15-cuda13.2"')
    line = next(l for l in text[start:].splitlines() if l.startswith("gpu_evidence = "))
    message = load_error(write_matrix(line + "\n", ""))
    assert f"{TORCH}, field 'gpu_evidence': missing" in message, message


def test_pytorch_has_no_cpu_variant_because_pypi_has_no_cpu_wheel(write_matrix):
    old = 'id = "torch2.15-cuda13.2"\nfamily = "cuda"'
    message = load_error(write_matrix(old, 'id = "torch2.15-cpu"\nfamily = "cpu"', ))
    # The cuda fields go first in the checks; without them the message names the CPU wheel.
    assert "variant 'torch2.15-cpu'" in message


def test_the_torch_compiler_goes_to_the_pytorch_images_only(real_matrix):
    for v in real_matrix.variants:
        expected = ("gcc", "g++", "libc6-dev", "python3-dev") if v.backend == "torch" else ()
        assert v.compiler_packages == expected, v.id


def test_a_matrix_without_torch_compiler_adds_none(write_matrix):
    loaded = matrix.load(write_matrix('[torch_compiler]\ndebian_packages = ["gcc", "g++", "libc6-dev", "python3-dev"]\n', ""))
    assert all(v.compiler_packages == () for v in loaded.variants)


@pytest.mark.parametrize("old, new, reason", [
    pytest.param('debian_packages = ["gcc", "g++", "libc6-dev", "python3-dev"]', 'debian_packages = []',
                 "must be a non-empty list of Debian package names", id="empty"),
    pytest.param('debian_packages = ["gcc", "g++", "libc6-dev", "python3-dev"]', 'debian_packages = "gcc"',
                 "must be a non-empty list of Debian package names", id="a-string"),
    pytest.param('debian_packages = ["gcc", "g++", "libc6-dev", "python3-dev"]', 'debian_packages = ["gcc; rm -rf /"]',
                 "must be a non-empty list of Debian package names", id="not-a-package-name"),
    pytest.param('debian_packages = ["gcc", "g++", "libc6-dev", "python3-dev"]',
                 'debian_packages = ["gcc"]\nclang = true', "unknown field(s) clang", id="unknown-field"),
])
def test_bad_torch_compiler_is_rejected(write_matrix, old, new, reason):
    message = load_error(write_matrix(old, new))
    assert "torch_compiler" in message and reason in message, message


# --- retired ids: a pinned old id is told what replaced it -----------------------------------

def test_the_retired_jax_ids_name_their_replacements(real_matrix):
    retired = {r.id: r.replaced_by for r in real_matrix.retired}
    assert retired == {"jax0.10-cuda12.9": "jax0.12-cuda12.9", "jax0.10-cpu": "jax0.12-cpu"}
    for old, new in retired.items():
        assert old not in real_matrix.ids and new in real_matrix.ids
        for asked in (old, f"{old}-jupyter"):
            with pytest.raises(UsageError) as info:
                real_matrix.get(asked)
            message = info.value.message
            assert message.startswith(f"{old} is retired since 2026-12-04 (JAX 0.10.2 was the last JAX for "
                                      "Debian 12's Python 3.11") and message.endswith(f"use {new} (kerasenv:{new})")
            assert "valid ids" not in message and "\n" not in message


def test_the_cli_names_the_replacement_of_a_retired_id(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "kerasenv", "kernel-targets", "jax0.10-cuda12.9"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "jax0.10-cuda12.9 is retired since 2026-12-04" in proc.stderr
    assert "use jax0.12-cuda12.9 (kerasenv:jax0.12-cuda12.9)" in proc.stderr


@pytest.mark.parametrize("old, new, reason", [
    pytest.param('replaced_by = "jax0.12-cpu"', 'replaced_by = "jax0.11-cpu"',
                 "replaced_by 'jax0.11-cpu' is not a variant id", id="replacement-unknown"),
    pytest.param('id = "jax0.10-cpu"\nreplaced_by', 'id = "tf2.21-cpu"\nreplaced_by',
                 "'tf2.21-cpu' is still a variant", id="still-built"),
    pytest.param('since = "2026-12-04"\nwhy = "JAX 0.10.2 was the last JAX for Debian 12\'s Python 3.11; the JAX images are now JAX 0.12.0.1 on Debian 13 (Python 3.13)"',
                 'since = "last week"\nwhy = "x"', "since 'last week' is not a date", id="bad-date"),
    pytest.param('since = "2026-12-04"\nwhy = "JAX 0.10.2 was the last JAX for Debian 12\'s Python 3.11; the JAX images are now JAX 0.12.0.1 on Debian 13 (Python 3.13)"',
                 'since = "2026-12-04"', "needs exactly the strings id, replaced_by, since", id="no-why"),
])
def test_bad_retired_entry_is_rejected(write_matrix, old, new, reason):
    message = load_error(write_matrix(old, new))
    assert "retired #" in message and reason in message, message


# --- the Debian suite of a base image -------------------------------------------------------

@pytest.mark.parametrize("base, suite", [
    ("debian:trixie-slim", "trixie"), ("debian:bookworm-slim", "bookworm"), ("debian:trixie", "trixie"),
    ("debian:bookworm-20260101-slim", "bookworm"), ("registry.example/library/debian:trixie-slim", "trixie"),
    ("rocm/tensorflow:rocm6.3.3-py3.12-tf2.17-dev", None), ("ubuntu:24.04", None), ("debian:12-slim", None),
    ("example/notdebian:trixie-slim", None),
])
def test_the_debian_suite_comes_from_the_base_image(real_matrix, base, suite):
    v = dataclasses.replace(real_matrix.get(real_matrix.default_cpu), base_image=base)
    assert v.debian_suite == suite


def test_the_debian_bases_are_each_base_once_with_its_suite_in_the_matrixs_order(real_matrix):
    first, second, rocm = (real_matrix.get(real_matrix.default_cpu), real_matrix.get(real_matrix.default_gpu),
                           real_matrix.get(real_matrix.default_rocm))
    two = dataclasses.replace(real_matrix, variants=(
        dataclasses.replace(first, base_image="debian:trixie-slim"), rocm,
        dataclasses.replace(second, base_image="debian:bookworm-slim"),
        dataclasses.replace(second, id="again", base_image="debian:trixie-slim")))
    assert two.debian_bases == {"debian:trixie-slim": "trixie", "debian:bookworm-slim": "bookworm"}
    assert set(real_matrix.debian_bases.values()) <= {"bookworm", "trixie"}
    assert all(v.base_image in real_matrix.debian_bases for v in real_matrix.variants if v.family != "rocm")
