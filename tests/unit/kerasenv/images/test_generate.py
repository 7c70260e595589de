"""Generated files: drift detection, atomic repair, and what the Dockerfiles contain."""

from __future__ import annotations

import re
import shutil

import pytest

from kerasenv.images import generate
from kerasenv.matrix import labels
from kerasenv.images import locks
from kerasenv.matrix import schema as matrix
from kerasenv.matrix import table

REPO = matrix.REPO_ROOT

SHARED_CUDA = ("tf2.21-cuda12.9", "tf2.20-cuda12.5")
# tf2.20 moved onto tf2.21's GPU-verified stack (valid: 2.20's `and-cuda` is a range), so the
# two share one CUDA stack as variants of one stack do.
_TF220_TESTED = 'cuda = "12.5"\ncudnn = "9.3.0.75"\nnccl = "2.27.7"\n'
BUILDKIT_ONLY = ("--mount", "<<EOF", "<<-EOF", "# syntax=", "--link")


@pytest.fixture
def shared_stack_matrix(write_matrix, real_matrix) -> matrix.Matrix:
    gpu = real_matrix.get("tf2.21-cuda12.9")
    ev = gpu.gpu_evidence
    override = (f'cuda = "{gpu.cuda}"\ncudnn = "{gpu.cudnn}"\nnccl = "{gpu.nccl}"\n'
                f'gpu_evidence = {{ source = "{ev.source}", gpu = "{ev.gpu}", date = "{ev.date}", '
                f'ran = "{ev.ran}" }}\n')
    return matrix.load(write_matrix(_TF220_TESTED, override))


def same_folder(text: str, variant_id: str) -> str:
    """The Dockerfile text with the variant's folder in COPY sources written as <id>/."""
    return text.replace(f"COPY {variant_id}/", "COPY <id>/").replace(f" {variant_id}/build-ca", " <id>/build-ca")


def dockerfile(m: matrix.Matrix, variant_id: str) -> str:
    return generate.dockerfile(m, m.get(variant_id))


def stage(text: str, name: str) -> str:
    """The lines of the stage `FROM ... AS name`, up to the next FROM."""
    match = re.search(rf"^FROM \S+ AS {re.escape(name)}\n(.*?)(?=^FROM |\Z)", text, re.M | re.S)
    assert match, f"no stage {name!r}"
    return match.group(0)


def final_stage(text: str) -> str:
    return text[text.rindex("\nFROM "):]


def instructions(text: str) -> list[str]:
    """Dockerfile lines that reach the builder (comments and blank lines do not)."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def drift_of(root) -> list[generate.Drift]:
    return generate.check(matrix.load(root / "images" / "matrix.toml"), root)


def assert_reported(drift, path, reason: str) -> None:
    assert any(d.path == path and reason in d.reason for d in drift), [str(d) for d in drift]


# --- drift ---------------------------------------------------------------------------

def test_committed_tree_has_no_drift(real_matrix, repo_root):
    assert [str(d) for d in generate.check(real_matrix, repo_root)] == []


def test_copy_of_the_tree_has_no_drift(repo_copy):
    assert drift_of(repo_copy) == []


def test_edited_dockerfile_is_drift(repo_copy):
    path = repo_copy / "images" / "tf2.21-cpu" / "Dockerfile"
    path.write_text(path.read_text() + "RUN echo hand-edited\n")
    assert_reported(drift_of(repo_copy), path, "differs")


def test_deleted_dockerfile_is_drift(repo_copy):
    path = repo_copy / "images" / "tf2.17-cuda12.3" / "Dockerfile"
    path.unlink()
    assert_reported(drift_of(repo_copy), path, "missing")


def test_folder_of_unknown_variant_is_drift(repo_copy):
    stray = repo_copy / "images" / "tf1.15-gpu"
    stray.mkdir()
    assert_reported(drift_of(repo_copy), stray, "not in the matrix")


def test_lock_with_another_keras_is_drift(repo_copy):
    path = repo_copy / "images" / "tf2.21-cpu" / "requirements.lock"
    text = path.read_text()
    assert "\nkeras==3.15.1 \\\n" in text
    path.write_text(text.replace("\nkeras==3.15.1 \\\n", "\nkeras==3.15.0 \\\n"))
    assert_reported(drift_of(repo_copy), path, "keras is 3.15.0")


def test_cuda_lock_on_a_cpu_variant_is_drift(repo_copy):
    images = repo_copy / "images"
    stray = images / "tf2.21-cpu" / "requirements-cuda.lock"
    shutil.copy(images / "tf2.21-cuda12.9" / "requirements-cuda.lock", stray)
    assert_reported(drift_of(repo_copy), stray, "no CUDA lock")


def test_leftover_per_variant_build_ca_md_is_drift(repo_copy):
    # One images/build/build-ca.md anchors every build's optional CA now.
    stray = repo_copy / "images" / "tf2.20-cuda12.5" / "build-ca.md"
    shutil.copy(repo_copy / "images" / generate.BUILD_DIR / "build-ca.md", stray)
    assert_reported(drift_of(repo_copy), stray, "left over from per-variant build contexts")
    assert_reported(drift_of(repo_copy), stray, "images/build/build-ca.md")


@pytest.mark.parametrize("name", [".dockerignore", "smoke_train.py"])
def test_other_leftovers_of_per_variant_contexts_are_drift(repo_copy, name):
    stray = repo_copy / "images" / "tf2.21-cpu" / name
    stray.write_text("left over\n")
    assert_reported(drift_of(repo_copy), stray, "left over from per-variant build contexts")


def test_shared_folders_of_images_are_not_taken_for_variants(repo_copy):
    for name in (matrix.IN_IMAGE_DIR, generate.TEMPLATES_DIR, generate.BUILD_DIR):
        assert (repo_copy / "images" / name).is_dir(), name
    assert not [d for d in drift_of(repo_copy) if "not in the matrix" in d.reason]


@pytest.mark.parametrize("name", ["build-ca.md", "install-locked-venv.sh", "cuda-loader-config.sh"])
def test_missing_file_of_images_build_is_drift(repo_copy, name):
    path = repo_copy / "images" / generate.BUILD_DIR / name
    path.unlink()
    assert_reported(drift_of(repo_copy), path, "a generated Dockerfile copies it")


def test_templates_are_read_from_images_templates_of_the_tree(repo_copy):
    # `kerasenv generate` renders the tree's own images/templates/: an edit there makes every
    # Dockerfile drift, and writing repairs it.
    template = repo_copy / "images" / generate.TEMPLATES_DIR / "debian.Dockerfile.in"
    template.write_text(template.read_text().replace("WORKDIR /workspace", "WORKDIR /work"))
    drift = drift_of(repo_copy)
    m = matrix.load(repo_copy / "images" / "matrix.toml")
    for v in m.variants:
        path = repo_copy / "images" / v.id / "Dockerfile"
        assert (v.family == "rocm") is not any(d.path == path for d in drift), v.id
    generate.write(m, repo_copy)
    assert "WORKDIR /work\n" in (repo_copy / "images" / "tf2.21-cpu" / "Dockerfile").read_text()
    assert drift_of(repo_copy) == []


def test_templates_live_in_images_not_in_the_package(repo_root):
    assert generate.templates_dir() == repo_root / "images" / "templates"
    assert sorted(p.name for p in generate.templates_dir().iterdir()) == [
        "debian.Dockerfile.in", "dockerignore.in", "jupyter.Dockerfile.in", "rocm.Dockerfile.in"]
    assert not (repo_root / "src" / "kerasenv" / "templates").exists()
    assert "templates/" not in (repo_root / "pyproject.toml").read_text()


def test_stale_readme_table_is_drift_and_gets_regenerated(repo_copy):
    readme = repo_copy / "README.md"
    readme.write_text(f"# kerasenv\n\n{table.BEGIN}\n| stale |\n{table.END}\n\nmore\n")
    assert_reported(drift_of(repo_copy), readme, "differs")
    generate.write(matrix.load(repo_copy / "images" / "matrix.toml"), repo_copy)
    assert "| stale |" not in readme.read_text()
    assert drift_of(repo_copy) == []


def test_write_repairs_dockerfile_drift_atomically(repo_copy):
    m = matrix.load(repo_copy / "images" / "matrix.toml")
    edited = repo_copy / "images" / "tf2.21-cpu" / "Dockerfile"
    deleted = repo_copy / "images" / "tf2.15-cuda12.2" / "Dockerfile"
    edited.write_text("FROM scratch\n")
    deleted.unlink()
    assert sorted(generate.write(m, repo_copy)) == sorted([edited, deleted])
    assert edited.read_text() == generate.dockerfile(m, m.get("tf2.21-cpu"))
    assert generate.check(m, repo_copy) == []
    assert list(repo_copy.rglob("*.tmp")) == []
    assert generate.write(m, repo_copy) == []  # nothing left to write


# --- Dockerfile contents ---------------------------------------------------------------

def test_cpu_dockerfile_has_no_cuda_stage_and_no_nvidia_env(real_matrix):
    text = dockerfile(real_matrix, real_matrix.default_cpu)
    assert "cuda-libs" not in text
    assert "NVIDIA_" not in text


@pytest.mark.parametrize("variant_id", ["tf2.21-cuda12.9", "tf2.17-cuda12.3", "tf2.14-cuda11.8"])
def test_cuda_dockerfile_carries_static_labels_and_nvidia_env(real_matrix, variant_id):
    text = dockerfile(real_matrix, variant_id)
    static = labels.static_labels(real_matrix, real_matrix.get(variant_id))
    assert "io.kerasenv.min-driver-ptx-jit" in static
    for key, value in static.items():
        assert f'{key}="{value}"' in text, key
    assert "NVIDIA_VISIBLE_DEVICES=all" in final_stage(text)


def test_no_dockerfile_uses_buildkit_only_syntax(real_matrix):
    for v in real_matrix.variants:
        text = generate.dockerfile(real_matrix, v)
        assert [s for s in BUILDKIT_ONLY if s in text] == [], v.id


def test_final_stage_never_sees_the_build_ca(real_matrix):
    for v in real_matrix.variants:
        final = final_stage(generate.dockerfile(real_matrix, v))
        assert final.startswith("\nFROM ")
        for needle in ("build-ca", "PIP_CERT", "build-trust"):
            assert needle not in final, (v.id, needle)


def test_cuda_libs_stage_is_identical_for_variants_sharing_a_stack(shared_stack_matrix):
    first, second = (stage(dockerfile(shared_stack_matrix, i), "cuda-libs") for i in SHARED_CUDA)
    assert "requirements-cuda.lock" in first
    assert first == second


def test_the_jax_image_shares_the_default_gpu_image_s_cuda_layer(real_matrix):
    # JAX 0.10.2 resolves with tf2.21-cuda12.9's CUDA 12.9.1 stack (backend_releases.py): the
    # same cuda-libs stage and the same CUDA lock bytes, so Docker stores the layer once.
    jax, tf = real_matrix.get("jax0.12-cuda12.9"), real_matrix.get("tf2.21-cuda12.9")
    assert jax.cuda_wheels() == tf.cuda_wheels()
    assert stage(dockerfile(real_matrix, jax.id), "cuda-libs") == stage(dockerfile(real_matrix, tf.id), "cuda-libs")
    locks = [(REPO / "images" / i / "requirements-cuda.lock").read_bytes() for i in (jax.id, tf.id)]
    assert locks[0] == locks[1]


def test_shared_stages_read_no_path_of_the_variant_s_folder(real_matrix):
    # The classic builder's COPY cache key includes the source's path in the context (a COPY
    # of an identical file from tf2.20-cuda12.5/ and from tf2.21-cuda12.9/ misses the cache):
    # python-base, build-trust and cuda-libs take the variant's files only through the
    # build-ca and cuda-lock stages, whose paths are the same in every variant.
    for v in real_matrix.variants:
        if v.family == "rocm":
            continue
        text = dockerfile(real_matrix, v.id)
        shared = instructions(text[text.index("AS python-base\n"): text.index("FROM build-trust AS builder")])
        # Only the FROM scratch AS cuda-lock stage among them names the folder, and nothing
        # builds on that stage: cuda-libs copies from it.
        reading = [line for line in shared if f"{v.id}/" in line and not line.startswith("FROM ")]
        assert reading == [f"COPY {v.id}/requirements-cuda.lock /"] * (v.family == "cuda"), v.id
        assert instructions(stage(text, "build-ca")) == [
            "FROM scratch AS build-ca", f"COPY build/build-ca.md {v.id}/build-ca.pe[m] /"]
        assert "COPY --from=build-ca / /tmp/build-trust/" in shared
        if v.family == "cuda":
            assert instructions(stage(text, "cuda-lock")) == [
                "FROM scratch AS cuda-lock", f"COPY {v.id}/requirements-cuda.lock /"]
            assert "COPY --from=cuda-lock /requirements-cuda.lock /tmp/build/" in shared


def test_runtime_up_to_the_cuda_layer_is_identical_for_variants_sharing_a_stack(shared_stack_matrix):
    # A stage's cache key is its parent and its own instructions: the builder stage (which
    # names the variant's TensorFlow) does not enter the runtime's, so the comparison runs
    # from the runtime's FROM through the CUDA layers (the four parts of split-cuda-layers.sh).
    marker, start = "COPY --from=cuda-libs", "FROM python-base AS runtime"
    prefixes = []
    for variant_id in SHARED_CUDA:
        text = dockerfile(shared_stack_matrix, variant_id)
        assert text.count(marker) == 4 and text.count(start) == 1
        end = text.index("\n", text.rindex(marker))
        prefixes.append(instructions(same_folder(text[text.index(start): end], variant_id)))
    assert prefixes[0] == prefixes[1]
    assert len(prefixes[0]) >= 7  # FROM, SHELL, the user and directories, the four parts
    assert [line for line in prefixes[0] if line.startswith(marker)] == [
        f"{marker} /opt/cuda-parts/{n}/ /" for n in (1, 2, 3, 4)]


def test_debian_updates_and_graphviz_are_one_base_step_shared_by_every_image(real_matrix):
    """The base stage's one apt step applies Debian's updates of one archive state
    (build/debian-updates.sh, keyed by the DEBIAN_UPDATES build arg) and installs Python and
    plot_model's `dot` (Debian's graphviz), in python-base, the stage every Debian-based image
    is built on: one layer shared by every image on the same Debian base (Docker stores a layer
    per parent chain; two bases, Debian 13 and 12, give two python-base stages). apt's
    lists and its package caches (*.bin, 77 MB on a debootstrapped base) leave in that step, and
    the runtime installs no Debian package of its own."""
    bases: dict[str, set[str]] = {}
    for v in real_matrix.debian_based:
        text = dockerfile(real_matrix, v.id)
        base = instructions(stage(text, "python-base"))
        step = next(i for i, line in enumerate(base) if "debian-updates.sh" in line and line.startswith("RUN"))
        assert base[step - 2] == "ARG DEBIAN_UPDATES=unknown" and base[step - 1] == "COPY build/debian-updates.sh /tmp/build/"
        run = " ".join(base[step: step + 4])
        assert 'bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" ca-certificates python3 graphviz' in run
        assert "/var/cache/apt/*.bin" in run and "dot -V" in run
        assert "apt-get" not in stage(text, "runtime"), v.id
        assert 'io.kerasenv.debian-updates="${DEBIAN_UPDATES}"' in text and "ARG DEBIAN_UPDATES=unknown\nARG KERASENV" in text
        bases.setdefault(v.base_image, set()).add("\n".join(base))
    assert set(bases) == {"debian:trixie-slim", "debian:bookworm-slim"}
    assert all(len(stages) == 1 for stages in bases.values()), bases
    script = (REPO / "images" / "build" / "debian-updates.sh").read_text()
    assert "rm -rf /var/lib/apt/lists/*" in script and "--with-new-pkgs upgrade" in script


def test_stages_before_the_builder_are_identical_for_variants_sharing_a_stack(shared_stack_matrix):
    marker = "FROM build-trust AS builder"
    first, second = (instructions(same_folder(dockerfile(shared_stack_matrix, i)[
        : dockerfile(shared_stack_matrix, i).index(marker)], i)) for i in SHARED_CUDA)
    assert first == second


def test_cuda_lock_inputs_depend_on_the_stack_alone(shared_stack_matrix, real_matrix):
    # The cuda-libs layer is only reused when COPY requirements-cuda.lock sees the same bytes,
    # and the lock is resolved from these inputs alone.
    a, b = (shared_stack_matrix.get(i) for i in SHARED_CUDA)
    assert locks.cuda_inputs(a) == locks.cuda_inputs(b)
    # The committed tf2.20 keeps TF's tested 12.5 stack: a different lock, a different layer.
    committed = [real_matrix.get(i) for i in SHARED_CUDA]
    assert locks.cuda_inputs(committed[0]) != locks.cuda_inputs(committed[1])


# --- scripts of the build steps (images/build/) --------------------------------------------

def build_scripts(text: str) -> list[str]:
    return re.findall(r"^COPY build/(\S+\.sh) /tmp/build/$", text, re.M)


def test_each_script_is_copied_right_before_the_step_that_runs_it(real_matrix):
    # Copied alone and just in time: an edit to one script re-runs its own step and what
    # follows, never another variant's steps. (split-cuda-layers.sh runs in the CUDA wheels'
    # install step, so that the wheels are moved within one layer, not copied up from another.)
    for v in real_matrix.variants:
        # Instructions with their continuation lines joined.
        lines = re.sub(r"\\\n\s*", "", "\n".join(instructions(generate.dockerfile(real_matrix, v)))).splitlines()
        for i, line in enumerate(lines):
            match = re.fullmatch(r"COPY build/(\S+\.sh) /tmp/build/", line)
            if match:
                assert re.match(rf"RUN (.* && )?bash /tmp/build/{re.escape(match.group(1))} ", lines[i + 1]), \
                    (v.id, line, lines[i + 1])
        assert "COPY build/ " not in "\n".join(lines) and "COPY build /" not in "\n".join(lines)


def test_scripts_named_by_the_dockerfiles_exist_and_stop_at_the_first_error(real_matrix, repo_root):
    named = {s for v in real_matrix.variants for s in build_scripts(generate.dockerfile(real_matrix, v))}
    assert named == {"install-locked-venv.sh", "write-pip-constraints.sh", "cuda-loader-config.sh",
                     "split-cuda-layers.sh", "debian-updates.sh"}
    on_disk = {p.name for p in (repo_root / "images" / generate.BUILD_DIR).glob("*.sh")}
    assert on_disk == named  # no script that no Dockerfile runs
    for name in named:
        text = (repo_root / "images" / generate.BUILD_DIR / name).read_text()
        assert text.startswith("#!/bin/bash\n# Usage: "), name
        assert "\nset -euo pipefail\n" in text, name
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        assert "grep -q" not in code and "| head" not in code, name  # SIGPIPE under pipefail


def test_no_script_enters_the_stages_of_the_cuda_layer(real_matrix):
    for v in real_matrix.variants:
        text = generate.dockerfile(real_matrix, v)
        if v.family != "cuda":
            continue
        # From the CUDA stages on (python-base's debian-updates.sh keys every stage built on it:
        # a new Debian archive state is a new base, under the CUDA layer as under the rest).
        head = text[text.index("FROM scratch AS cuda-lock"): text.index("FROM build-trust AS builder")]
        # One script, the split into parts, run in the install's own step (the wheels are then
        # renamed within one layer, not copied up from the install's: 4.7 GB written once).
        # The price: an edit of the script downloads the wheels again.
        assert build_scripts(head) == ["split-cuda-layers.sh"], v.id
        assert re.findall(r"^COPY build/\S+", head, re.M) == ["COPY build/split-cuda-layers.sh"], v.id
        install = re.search(r"^RUN pip install (?:[^\n]*\\\n)*[^\n]*", head, re.M).group(0)
        assert "--target /opt/cuda-libs" in install and "bash /tmp/build/split-cuda-layers.sh " in install, v.id


def test_variant_values_reach_the_scripts_as_arguments(real_matrix):
    for v in real_matrix.variants:
        if v.family == "rocm":
            continue
        text = generate.dockerfile(real_matrix, v)
        assert f"RUN bash /tmp/build/install-locked-venv.sh /opt/venv {v.python} /tmp/build/requirements.lock\n" in text
        assert (f"RUN bash /tmp/build/write-pip-constraints.sh /opt/kerasenv-pins "
                f"{v.framework_package}=={v.framework_version} /tmp/build/requirements*.lock\n") in text
        assert f"    KERAS_BACKEND={v.backend}\n" in text, v.id
        cuda_step = f"RUN bash /tmp/build/cuda-loader-config.sh /opt/venv {v.python} {v.cuda} \\\n"
        assert (cuda_step in text) is (v.family == "cuda"), v.id


def test_the_final_stage_deletes_the_script_it_runs_in_the_same_step(real_matrix):
    for v in real_matrix.variants:
        final = final_stage(generate.dockerfile(real_matrix, v))
        runs = re.findall(r"^RUN bash /tmp/build/.*?(?<!\\)$", final, re.M | re.S)
        # the CUDA loader set-up; torch.compile's compiler (PyTorch images, [torch_compiler])
        assert len(runs) == (v.family == "cuda") + bool(v.compiler_packages), v.id
        for run in runs:
            assert run.rstrip().endswith("&& rm -rf /tmp/build"), (v.id, run)


# --- images/.dockerignore ----------------------------------------------------------------

def dockerignore_rules(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_dockerignore_lets_in_each_variant_s_files_the_scripts_and_the_in_image_code(real_matrix):
    rules = dockerignore_rules(generate.dockerignore(real_matrix))
    assert rules[0] == "*"
    assert {"!common", "!build/*.sh", "!build/build-ca.md"} <= set(rules)
    for v in real_matrix.variants:
        assert f"!{v.id}/Dockerfile" in rules
        assert (f"!{v.id}/{matrix.JUPYTER_DOCKERFILE}" in rules) is (v in real_matrix.with_jupyter())
        assert (f"!{v.id}/build-ca.pem" in rules) is (v.family != "rocm")


def test_dockerignore_exceptions_name_their_folder_literally(real_matrix):
    # The classic builder skips an excluded folder unless an exception starts with its path:
    # `!*/Dockerfile` would leave every Dockerfile out of a plain `docker build`.
    for rule in dockerignore_rules(generate.dockerignore(real_matrix)):
        if rule.startswith("!"):
            folder = rule[1:].rpartition("/")[0]
            assert not re.search(r"[*?\[]", folder), rule


def test_dockerignore_keeps_templates_and_caches_out(real_matrix):
    rules = dockerignore_rules(generate.dockerignore(real_matrix))
    assert not [r for r in rules if r.startswith("!") and ("templates" in r or r[1:].startswith("*"))]
    assert {"common/**/__pycache__", "common/**/*.pyc"} <= set(rules)
    assert rules.index("common/**/__pycache__") > rules.index("!common")


# --- the JupyterLab flavour's Dockerfile -----------------------------------------------------

def test_every_jupyter_variant_and_no_other_gets_a_jupyter_dockerfile(real_matrix, repo_root):
    expected = generate.expected_files(real_matrix, repo_root)
    for v in real_matrix.variants:
        path = repo_root / "images" / v.id / matrix.JUPYTER_DOCKERFILE
        assert (path in expected) is (v in real_matrix.with_jupyter()), v.id


def test_deleted_jupyter_dockerfile_is_drift_and_gets_regenerated(repo_copy):
    path = repo_copy / "images" / "tf2.21-cpu" / matrix.JUPYTER_DOCKERFILE
    path.unlink()
    assert_reported(drift_of(repo_copy), path, "missing; run `make generate`")
    m = matrix.load(repo_copy / "images" / "matrix.toml")
    assert generate.write(m, repo_copy) == [path]
    assert path.read_text() == generate.jupyter_dockerfile(m, m.get("tf2.21-cpu"))
    assert drift_of(repo_copy) == []


def test_edited_jupyter_dockerfile_is_drift(repo_copy):
    path = repo_copy / "images" / "tf2.20-cuda12.5" / matrix.JUPYTER_DOCKERFILE
    path.write_text(path.read_text().replace("--ServerApp.ip=0.0.0.0", "--ServerApp.token=''"))
    assert_reported(drift_of(repo_copy), path, "differs")


def test_missing_jupyter_lock_is_drift(repo_copy):
    path = repo_copy / "images" / "tf2.17-cuda12.3" / locks.JUPYTER_LOCK
    path.unlink()
    assert_reported(drift_of(repo_copy), path, "missing; run `kerasenv lock tf2.17-cuda12.3`")


def test_a_new_jupyterlab_in_the_matrix_makes_every_jupyter_file_drift(repo_copy, real_matrix):
    text = (repo_copy / "images" / "matrix.toml").read_text()
    (repo_copy / "images" / "matrix.toml").write_text(text.replace('jupyterlab = "4.6.6"', 'jupyterlab = "4.6.7"'))
    drift = drift_of(repo_copy)
    for v in real_matrix.with_jupyter():
        folder = repo_copy / "images" / v.id
        assert_reported(drift, folder / matrix.JUPYTER_DOCKERFILE, "differs")
        assert_reported(drift, folder / locks.JUPYTER_LOCK, "locked for another JupyterLab")
    assert not [d for d in drift if d.path.name == "Dockerfile"]  # the training images stay as they are


@pytest.mark.parametrize("variant_id", ["tf2.21-cpu", "tf2.21-cuda12.9"])
def test_jupyter_dockerfile_builds_on_the_variant_and_bakes_in_no_token(real_matrix, variant_id):
    v = real_matrix.get(variant_id)
    text = generate.jupyter_dockerfile(real_matrix, v)
    lab = real_matrix.jupyter.jupyterlab
    assert f"ARG VARIANT_IMAGE={v.image_ref}\n" in text
    assert [line for line in text.splitlines() if line.startswith("FROM ")] == [
        "FROM ${VARIANT_IMAGE} AS jupyter-builder", "FROM ${VARIANT_IMAGE}"]
    assert f'io.kerasenv.jupyterlab="{lab}"' in text and 'io.kerasenv.flavour="jupyter"' in text
    assert f"COPY {v.id}/{locks.JUPYTER_LOCK} " in text and "--require-hashes" in text
    assert not any(token in text for token in BUILDKIT_ONLY)
    final = final_stage(text)
    assert "build-ca" not in final and "USER 0" not in final
    assert "EXPOSE 8888" in final
    assert not re.search(r"JUPYTER_TOKEN=\S", text)
    assert not re.search(r"(ServerApp|IdentityProvider)\.(token|password)", text)
    cmd = next(line for line in final.splitlines() if line.startswith("CMD "))
    assert '[ -n \\"${JUPYTER_TOKEN+set}\\" ] && [ -z \\"$JUPYTER_TOKEN\\" ]' in cmd and "exit 2" in cmd
    assert "--ServerApp.root_dir=/workspace" in cmd and "--ServerApp.port=8888" in cmd


def test_the_templates_notes_stay_in_the_template(real_matrix):
    """`##` lines explain the template's steps to whoever edits it; the generated Dockerfiles
    keep only the `#` lines (a header per stage), so they stay short."""
    template = (generate.templates_dir() / "debian.Dockerfile.in").read_text()
    assert template.count("\n##") > 20
    for v in real_matrix.debian_based:
        text = generate.dockerfile(real_matrix, v)
        assert "\n##" not in text and not text.startswith("##")
        assert "# ---- runtime: interpreter + venv, no build tools, no build CA, non-root" in text
    assert generate.render("a\n## note\n  ## indented note\nb\n", {}, {}) == "a\nb\n"


# --- [torch_compiler] ----------------------------------------------------------------------

def test_only_the_pytorch_images_install_the_compiler_from_the_base_s_archive_state(real_matrix):
    for v in real_matrix.variants:
        text = generate.dockerfile(real_matrix, v)
        step = 'RUN bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" gcc g++ libc6-dev python3-dev \\\n'
        in_runtime = step in final_stage(text)
        assert in_runtime is (v.backend == "torch" and v.family != "rocm"), v.id
        # no cache path baked in: `import torch._dynamo` creates it, which a read-only root refuses
        assert "TORCHINDUCTOR_CACHE_DIR" not in text and "TRITON_CACHE_DIR" not in text, v.id
        if in_runtime:  # before the CUDA parts and the venv: a new lock does not re-run apt
            assert final_stage(text).index(step) < final_stage(text).index("COPY --from=builder /opt/venv"), v.id

