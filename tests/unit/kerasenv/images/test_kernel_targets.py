"""`kerasenv kernel-targets`: the record made of a probe's parse, its drift check, the refusals,
and the matrix reading the committed records (no Docker: the probe's JSON is given)."""

from __future__ import annotations

import json

import pytest

from kerasenv.errors import KerasenvError, MatrixError, UsageError
from kerasenv.images import kernel_targets
from kerasenv.matrix import kernel_targets as record
from kerasenv.matrix import labels
from kerasenv.matrix import schema

PARSED = {
    "tool_version": 1, "site_packages": "/opt/venv/lib/python3.11/site-packages", "seconds": 1.2,
    "frameworks": {"tensorflow": {"version": "2.21.0", "sass": ["sm_60", "sm_90"], "ptx": ["compute_90"],
                                  "files_with_gpu_code": ["tensorflow/libtensorflow_cc.so.2"]}},
    "libraries": {"cudnn": {"sass": ["sm_90", "sm_120"], "ptx": []}, "cuda_runtime": {"sass": [], "ptx": []}},
    "fatbin_entries": 42, "unreadable": [],
}


def test_the_record_keeps_what_does_not_change_between_runs(real_matrix):
    v = real_matrix.get("tf2.21-cuda12.9")
    recorded = kernel_targets.to_record(v, PARSED)
    assert recorded == {"variant": "tf2.21-cuda12.9", "tool_version": 1,
                        "framework": {"name": "tensorflow", "version": "2.21.0", "sass": ["sm_60", "sm_90"],
                                      "ptx": ["compute_90"]},
                        "libraries": {"cudnn": {"sass": ["sm_90", "sm_120"], "ptx": []}}, "fatbin_entries": 42}
    table = kernel_targets.format_table(recorded, 1.2)
    assert "tensorflow 2.21.0" in table and "sm_60,sm_90" in table and "1.2 s in the container" in table


@pytest.mark.parametrize("frameworks, says", [({}, "found none"),
                                              ({"tensorflow": {"version": "2.21.0", "sass": [], "ptx": []}},
                                               "carries no GPU code")])
def test_an_image_without_one_gpu_framework_is_refused(real_matrix, frameworks, says):
    with pytest.raises(KerasenvError, match=says):
        kernel_targets.to_record(real_matrix.get("tf2.21-cuda12.9"), {**PARSED, "frameworks": frameworks})


def test_tensorflow_cpu_beside_the_backend_is_left_out_and_must_carry_no_gpu_code(real_matrix):
    """A JAX or PyTorch image carries tensorflow-cpu (tf.data, TensorBoard): the record is the
    backend's, and a TensorFlow with GPU code beside it is refused."""
    v = real_matrix.get("torch2.15-cuda13.2")
    torch = {"version": "2.15.0", "sass": ["sm_75", "sm_120"], "ptx": [], "files_with_gpu_code": ["torch/lib/x.so"]}
    cpu_tf = {"version": "2.21.0", "sass": [], "ptx": [], "files_with_gpu_code": []}
    recorded = kernel_targets.to_record(v, {**PARSED, "frameworks": {"tensorflow": cpu_tf, "torch": torch}})
    assert recorded["framework"] == {"name": "torch", "version": "2.15.0", "sass": ["sm_75", "sm_120"], "ptx": []}
    gpu_tf = {**cpu_tf, "sass": ["sm_90"]}
    with pytest.raises(KerasenvError, match="tensorflow beside torch carries GPU code"):
        kernel_targets.to_record(v, {**PARSED, "frameworks": {"tensorflow": gpu_tf, "torch": torch}})
    with pytest.raises(KerasenvError, match="expected the torch framework's GPU libraries, found tensorflow"):
        kernel_targets.to_record(v, {**PARSED, "frameworks": {"tensorflow": cpu_tf}})


def test_write_then_drift_check_and_the_matrix_reads_it(repo_copy):
    matrix = schema.load(repo_copy / "images" / "matrix.toml")
    v = matrix.get("tf2.21-cuda12.9")
    recorded = kernel_targets.to_record(v, PARSED)
    path = kernel_targets.write(matrix, v, recorded)
    assert path == repo_copy / "images" / "tf2.21-cuda12.9" / "kernel-targets.json"
    assert kernel_targets.drift(matrix, v, recorded) is None
    changed = {**recorded, "fatbin_entries": 43}
    assert "differs from the image in: fatbin_entries" in kernel_targets.drift(matrix, v, changed)
    reloaded = schema.load(repo_copy / "images" / "matrix.toml").get("tf2.21-cuda12.9")
    assert reloaded.kernel_targets.sass == ("sm_60", "sm_90") and reloaded.kernel_targets.library("cudnn") == \
        (("sm_90", "sm_120"), ())


def test_a_variant_without_a_record_has_no_kernel_targets(repo_copy):
    (repo_copy / "images" / "tf2.20-cuda12.5" / "kernel-targets.json").unlink()
    matrix = schema.load(repo_copy / "images" / "matrix.toml")
    assert matrix.get("tf2.20-cuda12.5").kernel_targets is None
    assert matrix.get("tf2.21-cpu").kernel_targets is None
    assert "io.kerasenv.kernels.sass" not in labels.static_labels(matrix, matrix.get("tf2.20-cuda12.5"))


def test_a_malformed_record_is_one_line_naming_how_to_re_record(repo_copy):
    (repo_copy / "images" / "tf2.21-cuda12.9" / "kernel-targets.json").write_text('{"framework": {"sass": ["90"]}}')
    with pytest.raises(MatrixError) as caught:
        schema.load(repo_copy / "images" / "matrix.toml")
    assert "kerasenv kernel-targets tf2.21-cuda12.9 --write" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_every_committed_cuda_variant_has_a_record_from_the_current_parser(real_matrix):
    from kerasenv_image.probes import kernel_targets as probe

    for v in (x for x in real_matrix.variants if x.family == "cuda"):
        path = record.record_path(real_matrix.path.parent, v.id)
        if not path.exists():
            continue  # a new variant, recorded once its image is built
        raw = json.loads(path.read_text())
        assert raw["variant"] == v.id and raw["tool_version"] == probe.TOOL_VERSION, path
        assert v.kernel_targets.version == v.tensorflow or v.kernel_targets.framework != "tensorflow", path


def test_the_recorded_tf_binaries_correct_the_published_lists(real_matrix):
    # TF's .bazelrc list for 2.17+ stops at compute_90; the binaries carry SASS sm_90 too.
    v = real_matrix.get("tf2.21-cuda12.9")
    assert "sm_90" in v.kernel_targets.sass and "sm_90" not in v.compute_capabilities


def test_cpu_and_missing_images_are_refused_with_the_fix(real_matrix):
    from docker.errors import ImageNotFound

    with pytest.raises(UsageError, match="CUDA variants only"):
        kernel_targets.probe(None, real_matrix, real_matrix.get("tf2.21-cpu"))

    class NoImages:
        class images:
            @staticmethod
            def get(ref):
                raise ImageNotFound(ref)

    with pytest.raises(UsageError, match=r"run `make build VARIANT=tf2.21-cuda12.9` first"):
        kernel_targets.probe(NoImages, real_matrix, real_matrix.get("tf2.21-cuda12.9"))
