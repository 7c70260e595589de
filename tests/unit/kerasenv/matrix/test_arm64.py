"""The arm64 images of a tag ([variant.arm64], issue 36): what the matrix accepts, the Dockerfile
and lock they are built from, and the labels that say what each architecture's image carries."""

from __future__ import annotations

import pytest

from kerasenv.errors import MatrixError, UsageError
from kerasenv.images import generate, locks
from kerasenv.matrix import labels, schema

ARM64_IDS = ("jax0.12-cuda12.9", "torch2.15-cuda13.2")
TORCH_ARM64 = '[variant.arm64]\ngpu_evidence = { source = "https://github.com/pytorch/pytorch/issues/172629"'


def test_the_jax_and_pytorch_cuda_images_have_an_arm64_image_under_the_same_tag(real_matrix):
    with_arm64 = [v.id for v in real_matrix.variants if v.arm64]
    assert sorted(with_arm64) == sorted(ARM64_IDS)
    for vid in ARM64_IDS:
        v = real_matrix.get(vid)
        assert v.platforms == (schema.AMD64, schema.ARM64)
        assert v.platform_ref(schema.ARM64) == f"kerasenv:{vid}-arm64"
        assert v.platform_ref(schema.AMD64) == v.image_ref
        assert v.arm64.evidence_gap  # says what the evidence does not cover
    assert real_matrix.get("tf2.21-cpu").platforms == (schema.AMD64,)


def test_a_variant_without_an_arm64_image_says_which_platforms_it_has(real_matrix):
    with pytest.raises(UsageError, match=r"tf2.21-cuda12.9 has no linux/arm64 image \(its platforms: linux/amd64\)"):
        real_matrix.get("tf2.21-cuda12.9").platform_ref(schema.ARM64)


@pytest.mark.parametrize("new, reason", [
    pytest.param('[variant.arm64]\nsize_budget_mb = 100\n', "'evidence_gap' must say", id="no-gap"),
    pytest.param('[variant.arm64]\nevidence_gap = "none"\nplatform = "x"\n', "unknown key 'platform'", id="unknown-key"),
    pytest.param('[variant.arm64]\nevidence_gap = "none"\nsize_budget_mb = -1\n', "positive", id="bad-budget"),
    pytest.param('[variant.arm64]\nevidence_gap = "none"\ngpu_evidence = { source = "http://x", gpu = "g", '
                 'date = "2026-01-01", ran = "r" }\n', "https:// URL", id="evidence-not-https"),
])
def test_bad_arm64_tables_are_rejected_in_one_line(write_matrix, matrix_text, new, reason):
    start = matrix_text.index(TORCH_ARM64)
    block = matrix_text[start:matrix_text.index("\n\n", start) + 1]  # the torch arm64 table
    with pytest.raises(MatrixError) as info:
        schema.load(write_matrix(block, new))
    assert "\n" not in info.value.message and reason in info.value.message
    assert "variant 'torch2.15-cuda13.2', field 'arm64" in info.value.message


def test_a_tensorflow_variant_cannot_have_an_arm64_image(write_matrix):
    # TF's aarch64 wheel is CPU-only (tensorflow/tensorflow#121157).
    path = write_matrix('size_budget_mb = 7000\nnotes = "the default GPU image"\n',
                        'size_budget_mb = 7000\nnotes = "the default GPU image"\n[variant.arm64]\nevidence_gap = "none"\n')
    with pytest.raises(MatrixError, match="tensorflow/tensorflow#121157"):
        schema.load(path)


@pytest.mark.parametrize("vid", ARM64_IDS)
def test_the_arm64_dockerfile_installs_aarch64_wheels_natively_and_runs_the_rest_on_the_arm64_base(real_matrix, vid):
    v = real_matrix.get(vid)
    text = generate.dockerfile(real_matrix, v, platform=schema.ARM64)
    assert "FROM ${BUILD_IMAGE} AS build-trust" in text
    assert "FROM --platform=${TARGET_PLATFORM} ${BASE_IMAGE} AS python-base" in text
    assert "FROM python-base AS runtime" in text
    assert f"COPY {vid}/requirements-arm64.lock {vid}/requirements-cuda.loc[k] /tmp/build/" in text
    platforms = text.split('PIP_PLATFORM="', 1)[1].split('"', 1)[0].split()
    # trixie's glibc 2.41 down to manylinux2014: every tag a locked aarch64 wheel carries
    assert platforms[0] == "manylinux_2_41_aarch64" and platforms[-1] == "manylinux2014_aarch64"
    assert {"manylinux_2_35_aarch64", "manylinux_2_27_aarch64", "manylinux_2_17_aarch64"} <= set(platforms)
    assert "PIP_PYTHON_VERSION=3.13" in text and "PIP_ONLY_BINARY=:all:" in text
    # the amd64 Dockerfile has none of it
    amd64 = generate.dockerfile(real_matrix, v)
    assert "TARGET_PLATFORM" not in amd64 and "PIP_PLATFORM" not in amd64 and "requirements-arm64" not in amd64


def test_inverted_template_sections_render_where_the_flag_is_false():
    template = "a\n{{#x}}\nyes\n{{/x}}\n{{^x}}\nno\n{{/x}}\nb\n"
    assert generate.render(template, {}, {"x": True}) == "a\nyes\nb\n"
    assert generate.render(template, {}, {"x": False}) == "a\nno\nb\n"


@pytest.mark.parametrize("vid", ARM64_IDS)
def test_the_arm64_lock_holds_the_amd64_versions_with_tensorflow_for_tensorflow_cpu(real_matrix, repo_root, vid):
    folder = repo_root / "images" / vid
    assert locks.check_arm64(real_matrix.get(vid), folder) == []
    arm = locks.parse((folder / locks.ARM64_LOCK).read_text())
    amd = locks.parse((folder / locks.MAIN_LOCK).read_text())
    assert "tensorflow-cpu" not in arm and arm["tensorflow"].version == amd["tensorflow-cpu"].version
    assert {k: p.version for k, p in arm.items() if k != "tensorflow"} == \
        {k: p.version for k, p in amd.items() if k != "tensorflow-cpu"}


def test_an_arm64_lock_at_other_versions_is_drift(real_matrix, repo_root, tmp_path):
    v = real_matrix.get("torch2.15-cuda13.2")
    src = repo_root / "images" / v.id
    for name in (locks.MAIN_LOCK, locks.CUDA_LOCK):
        (tmp_path / name).write_text((src / name).read_text())
    text = (src / locks.ARM64_LOCK).read_text()
    numpy = next(p for k, p in locks.parse(text).items() if k == "numpy")
    (tmp_path / locks.ARM64_LOCK).write_text(text.replace(f"numpy=={numpy.version}", "numpy==1.0.0"))
    problems = locks.check_arm64(v, tmp_path)
    assert len(problems) == 1 and "differs from requirements.lock in numpy" in problems[0][1]
    (tmp_path / locks.ARM64_LOCK).unlink()
    assert "missing; run `kerasenv lock torch2.15-cuda13.2`" in locks.check_arm64(v, tmp_path)[0][1]


def test_the_arm64_image_labels_its_own_gpu_evidence_and_what_it_leaves_open(real_matrix):
    v = real_matrix.get("torch2.15-cuda13.2")
    amd, arm = labels.static_labels(real_matrix, v), labels.static_labels(real_matrix, v, "arm64")
    assert arm["io.kerasenv.cuda-stack.source"] == "https://github.com/pytorch/pytorch/issues/172629"
    assert arm["io.kerasenv.cuda-stack.provenance"] == "arm64-gpu-run"
    assert "163664" in arm["io.kerasenv.cuda-stack.evidence-gap"]
    assert "io.kerasenv.cuda-stack.evidence-gap" not in amd
    assert amd["io.kerasenv.cuda-stack.source"] != arm["io.kerasenv.cuda-stack.source"]
    # the stack itself is one: the same versions and driver floors on both
    for key in ("io.kerasenv.cuda", "io.kerasenv.cudnn", "io.kerasenv.torch", "io.kerasenv.min-driver"):
        assert amd[key] == arm[key]
