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
    """The lines of the stage `FROM ... AS name` (`FROM --platform=... ... AS name` in an arm64
    Dockerfile), up to the next FROM."""
    match = re.search(rf"^FROM (?:--platform=\S+ )?\S+ AS {re.escape(name)}\n(.*?)(?=^FROM |\Z)", text, re.M | re.S)
    assert match, f"no stage {name!r}"
    return match.group(0)


def final_stage(text: str) -> str:
    return text[text.rindex("\nFROM "):]


def instructions(text: str) -> list[str]:
    """Dockerfile lines that reach the builder (comments and blank lines do not)."""
    return [line for line in text.splitlines() if line.strip() and not line.startswith("#")]


def steps(text: str) -> list[str]:
    """The instructions with their continuation lines joined: one line per instruction."""
    return re.sub(r"\\\n\s*", "", "\n".join(instructions(text))).splitlines()


def removed_paths(run: str) -> list[str]:
    """The paths each `rm` command of a (joined) RUN step names."""
    paths = []
    for command in re.split(r"&&|\|\||;|\|", run.removeprefix("RUN ")):
        words = command.split()
        if words and words[0] == "rm":
            paths += [w for w in words[1:] if not w.startswith("-")]
    return paths


def debian_dockerfiles(m: matrix.Matrix):
    """(name, text) of every Debian-based Dockerfile: each variant's, and its arm64 one."""
    for v in m.debian_based:
        yield v.id, generate.dockerfile(m, v)
        if v.arm64:
            yield f"{v.id}/{matrix.ARM64_DOCKERFILE}", generate.dockerfile(m, v, platform=matrix.ARM64)


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


# debian-updates.sh, point-release-sources.sh, clamp-mtimes.sh and cuda-loader-config.sh come in
# one multi-source `COPY build/a.sh build/b.sh ... /in/` (the build-scripts stage): each counts.
@pytest.mark.parametrize("name", ["build-ca.md", "install-locked-venv.sh", "image-tree.sh", "debian-updates.sh",
                                  "point-release-sources.sh", "clamp-mtimes.sh", "cuda-loader-config.sh"])
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
    assert len(prefixes[0]) >= 7  # FROM, SHELL, the image tree (user, folders, in-image code), the four parts
    assert [line for line in prefixes[0] if line.startswith(marker)] == [
        f"{marker} /opt/cuda-parts/{n}/ /" for n in (1, 2, 3, 4)]


def test_the_point_release_and_graphviz_are_one_base_step_shared_by_every_image(real_matrix):
    """The base stage's one apt step brings the base suite's point release (build/debian-updates.sh
    --point-release, keyed by the DEBIAN_POINT_RELEASE build arg, which moves only when Debian
    publishes a point release) and installs Python and plot_model's `dot` (Debian's graphviz), in
    python-base, the stage every Debian-based image is built on: one layer shared by every image on
    the same Debian base (Docker stores a layer per parent chain; two bases, Debian 13 and 12, give
    two python-base stages, each with the one build-scripts tree it copies its script from). The
    weekly -updates and -security state (DEBIAN_UPDATES, the label io.kerasenv.debian-updates)
    keys the runtime's last step alone (issue 52). apt's lists, its package caches (*.bin, 77 MB
    on a debootstrapped base) and its logs leave in the step that wrote them (the script), and the
    runtime runs no apt of its own."""
    bases: dict[str, set[str]] = {}
    for v in real_matrix.debian_based:
        text = dockerfile(real_matrix, v.id)
        base = instructions(stage(text, "python-base"))
        step = next(i for i, line in enumerate(base) if "debian-updates.sh" in line and line.startswith("RUN"))
        assert base[step - 2] == "COPY --from=build-scripts /out/ /" and base[step - 1] == "ARG DEBIAN_POINT_RELEASE=unknown"
        assert [line for line in base if line.startswith("RUN ")] == [base[step]], v.id  # one step
        run = " ".join(base[step: step + 3])
        assert ('bash /tmp/build/debian-updates.sh --point-release "$DEBIAN_POINT_RELEASE" '
                'ca-certificates python3 graphviz') in run
        assert "dot -V" in run
        assert "DEBIAN_UPDATES" not in "\n".join(base), v.id
        assert "apt-get" not in stage(text, "runtime"), v.id
        assert 'io.kerasenv.debian-updates="${DEBIAN_UPDATES}"' in text
        assert 'ARG DEBIAN_UPDATES=unknown\nRUN bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" \\\n' in final_stage(text)
        scripts = instructions(stage(text, "build-scripts"))
        bases.setdefault(v.base_image, set()).add("\n".join(scripts + base))
    assert set(bases) == {"debian:trixie-slim", "debian:bookworm-slim"}
    assert all(len(stages) == 1 for stages in bases.values()), bases
    script = (REPO / "images" / "build" / "debian-updates.sh").read_text()
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("#"))
    assert "--with-new-pkgs upgrade" in code
    assert "find /var/lib/apt/lists -mindepth 1" in code and "/var/cache/apt/*.bin" in code
    assert "/var/log/apt/*" in code


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
    """The scripts of images/build/ that the Dockerfile's COPY lines take from the context, in
    order: each `COPY build/x.sh /tmp/build/`, and each source of the build-scripts stage's
    multi-source `COPY build/a.sh build/b.sh ... /in/` (the last word is the destination)."""
    names = []
    for line in re.findall(r"^COPY (?!--from=)(.+)$", text, re.M):
        *sources, _destination = line.split()
        names += [s.removeprefix("build/") for s in sources if s.startswith("build/") and s.endswith(".sh")]
    return names


def scripts_run(text: str) -> set[str]:
    """The scripts of /tmp/build/ that the Dockerfile's steps run."""
    return set(re.findall(r"\bbash /tmp/build/(\S+\.sh)\b", text))


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
    texts = [text for _, text in debian_dockerfiles(real_matrix)]
    named = {s for text in texts for s in build_scripts(text)}
    assert named == {"install-locked-venv.sh", "write-pip-constraints.sh", "cuda-loader-config.sh",
                     "split-cuda-layers.sh", "debian-updates.sh", "point-release-sources.sh", "clamp-mtimes.sh",
                     "image-tree.sh"}
    build_dir = repo_root / "images" / generate.BUILD_DIR
    on_disk = {p.name for p in build_dir.glob("*.sh")}
    assert on_disk == named  # no script that no Dockerfile copies
    run = {s for text in texts for s in scripts_run(text)}
    assert run <= named  # every script a step runs came from the context
    for name in named - run:  # the others are run by a script that is (point-release-sources.sh)
        assert [other for other in run if f"/{name}" in (build_dir / other).read_text()], name
    for name in named:
        text = (build_dir / name).read_text()
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
        # The CUDA loader set-up runs right after its script's tree arrives, and dates what it wrote.
        cuda_step = (f"COPY --from=build-scripts /out-cuda/ /\nRUN started=$(date +%s) \\\n"
                     f" && bash /tmp/build/cuda-loader-config.sh /opt/venv {v.python} {v.cuda} \\\n")
        assert (cuda_step in text) is (v.family == "cuda"), v.id
        assert ("bash /tmp/build/clamp-mtimes.sh \"$started\"\n" in text) is (v.family == "cuda"), v.id
        tree_step = "RUN bash /tmp/build/image-tree.sh /tree /tmp/image-code" + " --cuda" * (v.family == "cuda") + "\n"
        assert tree_step in stage(text, "image-tree"), v.id


def test_only_the_runtime_s_last_step_deletes_the_build_scripts(real_matrix):
    """The final stage leaves no build script behind: /tmp/build (python-base's tree of scripts,
    and the CUDA loader's tree) is deleted by the runtime's last RUN, in the step that runs its
    last script. No earlier RUN of python-base or the runtime deletes anything under /tmp/build:
    a deleted file of a lower layer is a whiteout dated by the build (issue 52). No script enters
    either stage from the context: each comes in the build-scripts trees, dated 0."""
    for name, text in debian_dockerfiles(real_matrix):
        base, runtime = steps(stage(text, "python-base")), steps(stage(text, "runtime"))
        runs = [line for line in base + runtime if line.startswith("RUN ")]
        assert runs[-1] == [line for line in runtime if line.startswith("RUN ")][-1], name
        last = runs[-1]
        assert last.startswith('RUN bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" '), (name, last)
        assert last.endswith("&& rm -rf /var/cache/ldconfig/aux-cache /tmp/build"), (name, last)
        for run in runs[:-1]:
            deleted = [p for p in removed_paths(run) if p.startswith("/tmp/build") or p.rstrip("/") in ("/tmp", "/tmp/*")]
            assert deleted == [], (name, run)
        assert not [line for line in base + runtime if line.startswith(("COPY build/", "ADD "))], name
        # Every script these stages run is in a tree they copy from build-scripts.
        trees = dict((out, set(names.split())) for names, out in re.findall(
            r"install -m 755 ((?:/in/\S+\.sh )+)(/out(?:-cuda)?)/tmp/build/", stage(text, "build-scripts")))
        assert set(trees) == {"/out", "/out-cuda"}, name
        both = "\n".join(base + runtime)
        arrived = {script for out in re.findall(r"^COPY --from=build-scripts (/out\S*)/ /$", both, re.M)
                   for script in trees[out]}
        assert {f"/in/{s}" for s in scripts_run(both)} <= arrived, name
    for v in real_matrix.variants:
        if v.family == "rocm":  # AMD's image: no build script at all
            final = final_stage(generate.dockerfile(real_matrix, v))
            assert "/tmp/build" not in final and "COPY build/" not in final, v.id


def test_no_step_below_the_runtime_s_last_sees_the_weekly_debian_state(real_matrix):
    """DEBIAN_UPDATES (the -updates and -security state, which moves every week) keys the
    runtime's last RUN alone: it is declared right before it and named by no stage or step below
    it, so a security rebuild re-runs that step only and every other layer is the same (issue 52).
    Each apt step below it runs at the point release, keyed by DEBIAN_POINT_RELEASE. Nothing but
    metadata follows the last step: it is the image's last layer."""
    for name, text in debian_dockerfiles(real_matrix):
        lines = steps(text)
        last = max(i for i, line in enumerate(lines) if line.startswith("RUN "))
        assert lines[last] == [line for line in steps(stage(text, "runtime")) if line.startswith("RUN ")][-1], name
        assert lines[last].startswith('RUN bash /tmp/build/debian-updates.sh "$DEBIAN_UPDATES" '), name
        below = lines[:last]
        assert [line for line in below if "DEBIAN_UPDATES" in line] == ["ARG DEBIAN_UPDATES=unknown"], name
        assert below[-1] == "ARG DEBIAN_UPDATES=unknown", name
        apt_steps = [line for line in below if "bash /tmp/build/debian-updates.sh" in line]
        assert len(apt_steps) >= 2, name  # python-base's, build-trust's (and the compiler's)
        for line in apt_steps:
            assert 'bash /tmp/build/debian-updates.sh --point-release "$DEBIAN_POINT_RELEASE" ' in line, (name, line)
        # each stage declares the point release before its apt step
        for part in re.split(r"^(?=FROM )", text, flags=re.M):
            part_steps = steps(part)
            for i, line in enumerate(part_steps):
                if "--point-release" in line and line.startswith("RUN "):
                    assert "ARG DEBIAN_POINT_RELEASE=unknown" in part_steps[:i], (name, line)
        assert not [line for line in lines[last + 1:] if line.startswith(("RUN ", "COPY ", "ADD ", "WORKDIR "))], name


def test_the_runtime_deletes_nothing_below_its_last_step_and_copies_only_trees_from_root(real_matrix):
    """A RUN that deletes a lower layer's file leaves a whiteout dated by the build, so no RUN of
    the runtime (nor of python-base) but the last deletes anything under /tmp or apt's lists
    (issue 52). Each COPY of the runtime is a tree from another stage copied to /, whose entries
    and parent folders come dated: never a file of the build context (the checkout's dates) nor a
    COPY into a folder that does not exist yet (made and dated by the build)."""
    for name, text in debian_dockerfiles(real_matrix):
        runtime = steps(stage(text, "runtime"))
        runs = [line for line in runtime if line.startswith("RUN ")]
        for run in [line for line in steps(stage(text, "python-base")) if line.startswith("RUN ")] + runs[:-1]:
            whiteouts = [p for p in removed_paths(run) if p.startswith(("/tmp", "/var/lib/apt/lists"))]
            assert whiteouts == [], (name, run)
        assert "/tmp/build" in removed_paths(runs[-1]), name
        copies = [line.split() for line in runtime if line.startswith(("COPY ", "ADD "))]
        assert len(copies) >= 3, name  # the image tree, the venv, the pins (and the CUDA parts)
        for copy in copies:
            assert copy[0] == "COPY" and copy[1].startswith("--from=") and len(copy) == 4, (name, copy)
            assert copy[2].endswith("/") and copy[3] == "/", (name, copy)
        for tree in ("COPY --from=image-tree /tree/ /", "COPY --from=builder /opt/venv-tree/ /",
                     "COPY --from=builder /opt/kerasenv-pins/ /"):
            assert tree in runtime, (name, tree)


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

def test_only_the_pytorch_images_install_the_compiler_at_the_base_s_point_release(real_matrix):
    for v in real_matrix.variants:
        text = generate.dockerfile(real_matrix, v)
        runtime = final_stage(text)
        step = ('ARG DEBIAN_POINT_RELEASE=unknown\n'
                'RUN bash /tmp/build/debian-updates.sh --point-release "$DEBIAN_POINT_RELEASE" '
                'gcc g++ libc6-dev python3-dev \\\n')
        in_runtime = step in runtime
        assert in_runtime is (v.backend == "torch" and v.family != "rocm"), v.id
        # no cache path baked in: `import torch._dynamo` creates it, which a read-only root refuses
        assert "TORCHINDUCTOR_CACHE_DIR" not in text and "TRITON_CACHE_DIR" not in text, v.id
        point_release_steps = [line for line in steps(runtime) if "debian-updates.sh --point-release" in line]
        assert len(point_release_steps) == int(in_runtime), v.id  # no other apt step below the last
        if in_runtime:  # first in the runtime, before every COPY: a new lock or in-image code does not re-run apt
            assert runtime.index(step) < runtime.index("COPY --from="), v.id
            compiler = point_release_steps[0]
            assert "cc --version" in compiler and "c++ --version" in compiler and "Python.h" in compiler, v.id
            assert removed_paths(compiler) == [], v.id  # the script cleans up; /tmp/build stays for the last step
