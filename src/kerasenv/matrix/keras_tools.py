"""Keras's everyday tools on every backend: the matrix's [keras_tools] table (issue 30).

What a Keras tutorial calls besides fit() needs packages the framework does not bring:

- tf.data-backed utilities (`keras.utils.image_dataset_from_directory`, `text_...`,
  `audio_...`, `timeseries_dataset_from_array`) and `keras.callbacks.TensorBoard` import
  TensorFlow on every backend. The JAX and PyTorch images get `tensorflow-cpu` at the TF images'
  release, as keras-team's own JAX and PyTorch requirement files do ("needed for tf.data and
  TensorBoard"). The CPU build has no CUDA code, so TensorFlow in those images never sees a GPU
  nor takes GPU memory; JAX or PyTorch keeps the GPU.
- `format="grain"` of those utilities (Keras >= 3.12: the release whose
  image_dataset_utils.py has it) needs `grain`.
- `keras.utils.plot_model` needs `pydot` and Graphviz's `dot` (Debian's `graphviz`, in the
  Dockerfile template): every image, tf.keras 2 included.
- `model.export(path, format="onnx")` (Keras >= 3.8, keras/src/export/onnx.py) converts with a
  backend's own exporter: tf2onnx on TensorFlow; on JAX tf2onnx through jax2tf up to Keras 3.13
  and jax2onnx from 3.14; on PyTorch `torch.onnx` (its dynamo exporter needs onnxscript).
- `model.export(path)` (SavedModel) needs TensorFlow on every backend (JAX: jax2tf); on PyTorch
  it also needs torch_xla, whose newest PyPI release (2.9.0) is built for torch 2.9: imported
  beside the image's torch 2.15.0 its _XLAC fails with "undefined symbol:
  _ZN5torch8autograd10deleteNodeEPNS0_4NodeE" (tried in kerasenv:torch2.15-cuda13.2), so the
  PyTorch images export ONNX, not SavedModels. (Keras 3.15.1's PyTorch path fails before it gets
  there: torch.export refuses the dynamic_shapes it passes for a plain functional model.)

JAX 0.12 and the two exports (measured in kerasenv:jax0.12-cpu):

- ONNX: jax2onnx needs flax.nnx. flax 0.12.8 did not import on JAX 0.12 ("module
  'jax.experimental.hijax' has no attribute 'HiPrimitive'": flax/nnx/variablelib.py subclasses
  it), so the first JAX 0.12 images (2026-12-04) carried no jax2onnx. flax 0.12.12 requires
  jax>=0.11.1 and imports on 0.12.0.1 (issue 45): the table's `flax` is locked beside jax2onnx on
  JAX >= 0.12 (FLAX_FOR_JAX_FROM), since jax2onnx's own `flax>=0.12.1` would let a resolver pick
  a flax that does not import. What the index served when the locks were made is recorded by
  `kerasenv lock` (images/index-newest.json), not written here from memory.
- SavedModel: jax2tf embeds the model as StableHLO serialized for JAX's forward-compatibility
  window (4 weeks: StableHLO 1.18.0 from 0.12.0.1), and TensorFlow 2.21 deserializes up to
  1.13.7: model.export() writes the directory, and its first call after tf.saved_model.load()
  fails ("Cannot deserialize computation: ... unregistered operation 'vhlo.custom_call_v2' ...
  failed to deserialize portable artifact using StableHLO_v1.13.7"), as TF Serving would.

The versions are the table's; which variant gets what follows from its backend and Keras
release (`requirements`), so there is one place to change each.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

FIELDS = ("tensorflow_cpu", "grain", "pydot", "tf2onnx", "jax2onnx", "flax", "onnxscript")
GRAIN_FORMAT_SINCE = (3, 12)  # keras.utils.*_dataset_from_directory(format="grain")
ONNX_EXPORT_SINCE = (3, 8)  # model.export(format="onnx")
JAX2ONNX_SINCE = (3, 14)  # Keras on JAX exports ONNX with jax2onnx (before: jax2tf + tf2onnx)
SAVED_MODEL_BROKEN_FROM = (0, 12)  # JAX release whose SavedModel TF cannot read (the docstring says why)
FLAX_FOR_JAX_FROM = (0, 12)  # JAX release from which jax2onnx needs the table's flax pinned beside it


def _keras(variant) -> tuple[int, ...]:
    return tuple(int(p) for p in variant.keras.split(".") if p.isdigit())


def _jax_at_least(variant, release: tuple[int, int]) -> bool:
    return variant.backend == "jax" and tuple(int(p) for p in variant.framework_version.split(".")[:2]) >= release


def _jax_saved_model_broken(variant) -> bool:
    return _jax_at_least(variant, SAVED_MODEL_BROKEN_FROM)


@dataclass(frozen=True)
class KerasTools:
    tensorflow_cpu: str  # exact release: the TF images' (validated against the matrix)
    grain: str
    pydot: str
    tf2onnx: str
    jax2onnx: str
    flax: str  # beside jax2onnx on JAX >= 0.12: the first flax whose nnx imports there
    onnxscript: str

    def applies(self, variant) -> bool:
        return variant.family in ("cpu", "cuda")  # ROCm: AMD's image, nothing of ours locked

    def has_tensorflow(self, variant) -> bool:
        """TensorFlow in the image: the framework itself, or tensorflow-cpu beside JAX/PyTorch."""
        return variant.backend == "tensorflow" or self.applies(variant)

    def grain_format(self, variant) -> bool:
        return self.applies(variant) and not variant.keras_is_tf_keras and _keras(variant) >= GRAIN_FORMAT_SINCE

    def onnx_exporter(self, variant) -> str | None:
        """The package model.export(format="onnx") converts with (None: that Keras has no ONNX export)."""
        if not self.applies(variant) or variant.keras_is_tf_keras or _keras(variant) < ONNX_EXPORT_SINCE:
            return None
        if variant.backend == "jax" and _keras(variant) >= JAX2ONNX_SINCE:
            return "jax2onnx"
        return "onnxscript" if variant.backend == "torch" else "tf2onnx"

    def saved_model(self, variant) -> bool:
        """model.export(path) writes a SavedModel: TensorFlow and JAX (jax2tf) with TensorFlow in
        the image; not PyTorch (torch_xla has no release for the image's torch on PyPI)."""
        return self.has_tensorflow(variant) and variant.backend != "torch" and not _jax_saved_model_broken(variant)

    def offers(self, variant) -> dict[str, str | None]:
        """Each row of the issue's table (smoke_tests/keras_tools_script/tools.py's rows) -> None
        where the image offers it, else why not (docs/using/backends.md says the same)."""
        tf_keras = variant.keras_is_tf_keras
        keras = f"tf.keras {variant.keras}" if tf_keras else f"Keras {variant.keras}"
        rows: dict[str, str | None] = dict.fromkeys(
            ("image_dataset", "text_dataset", "audio_dataset", "timeseries", "tensorboard", "plot_model"))
        rows["grain"] = None if self.grain_format(variant) else (
            f"{keras} has no format=\"grain\" (Keras >= {'.'.join(map(str, GRAIN_FORMAT_SINCE))})")
        jax = f"JAX {variant.framework_version}" if _jax_saved_model_broken(variant) else None
        rows["saved_model"] = None if self.saved_model(variant) else (
            f"{jax} serializes the model as StableHLO 1.18 (its 4-week forward compatibility) and TensorFlow "
            f"{self.tensorflow_cpu} reads up to StableHLO 1.13.7: the SavedModel is written, but its first "
            "call after tf.saved_model.load() fails (\"Cannot deserialize computation: ... unregistered operation "
            "'vhlo.custom_call_v2'\")") if jax else (
            f"Keras {variant.keras} on PyTorch fails in torch.export first (\"Detected mismatch between the "
            "structure of `inputs` and `dynamic_shapes`\", for any functional model), and would then need "
            f"torch_xla, whose newest PyPI release (2.9.0) is built for torch 2.9, not {variant.framework_version}")
        rows["onnx"] = None if self.onnx_exporter(variant) else (
            f"{keras} has no model.export(format=\"onnx\") (Keras >= {'.'.join(map(str, ONNX_EXPORT_SINCE))})"
            + ("" if tf_keras else ": its export() ignores format= and writes a SavedModel directory at the path"))
        return rows

    def requirements(self, variant) -> list[str]:
        """What the variant's lock adds for these tools (exact pins)."""
        if not self.applies(variant):
            return []
        reqs = [] if variant.backend == "tensorflow" else [f"tensorflow-cpu=={self.tensorflow_cpu}"]
        if self.grain_format(variant):
            reqs.append(f"grain=={self.grain}")
        reqs.append(f"pydot=={self.pydot}")
        exporter = self.onnx_exporter(variant)
        if exporter:
            reqs.append(f"{exporter}=={getattr(self, exporter)}")
        if exporter == "jax2onnx" and _jax_at_least(variant, FLAX_FOR_JAX_FROM):
            reqs.append(f"flax=={self.flax}")
        return reqs


def parse(raw: Mapping[str, Any], variants, fail) -> KerasTools | None:
    """The [keras_tools] table (None when absent). tensorflow_cpu must be the release of the
    TF images on Keras 3 (all of one release), so tf.data behaves the same on every backend."""
    table = raw.get("keras_tools")
    if table is None:
        return None
    if not isinstance(table, dict):
        raise fail("keras_tools", "must be a table")
    unknown = sorted(set(table) - set(FIELDS))
    if unknown:
        raise fail("keras_tools", f"unknown field(s) {', '.join(unknown)}")
    for key in FIELDS:
        value = table.get(key)
        if not isinstance(value, str) or not re.fullmatch(r"[0-9]+(\.[0-9]+)+", value):
            raise fail(f"keras_tools, field '{key}'", f"must be an exact release like \"1.2.3\", got {value!r}")
    tools = KerasTools(**{k: table[k] for k in FIELDS})
    cpu_releases = sorted({v.tensorflow for v in variants if v.backend == "tensorflow" and v.family == "cpu"})
    if cpu_releases and tools.tensorflow_cpu not in cpu_releases:
        raise fail("keras_tools, field 'tensorflow_cpu'",
                   f"{tools.tensorflow_cpu} is not the release of the TensorFlow CPU image(s) "
                   f"({', '.join(cpu_releases)}): JAX and PyTorch images carry the same TensorFlow")
    return tools
