"""The Makefile: self-documenting, and in step with the tests it drives."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from ..conftest import REPO

MAKEFILE = (REPO / "Makefile").read_text()


def test_every_target_is_documented_in_make_help():
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", MAKEFILE, re.M))
    documented = set(re.findall(r"^([a-z][a-z0-9-]*):.*## ", MAKEFILE, re.M))
    assert targets - documented == set()
    help_text = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    assert all(f"make {t} " in help_text for t in documented)


def test_plain_make_prints_help():
    out = subprocess.run(["make", "--no-print-directory"], cwd=REPO, capture_output=True, text=True).stdout
    assert out.startswith("kerasenv:") and "make run-gpu" in out


def test_make_test_builds_and_accepts_every_debian_based_variant(real_matrix):
    """No untested row: `make test` (CI's command) builds every variant of the matrix but ROCm,
    with its JupyterLab flavour, and runs the acceptance suite on each, in its three lanes (one
    build lane, two test lanes taking the built variants in turn)."""
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout
    assert re.search(r"make --no-print-directory -j4 --output-sync=line test-lanes$", recipe, re.M)
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout
    for v in real_matrix.debian_based:
        assert re.search(rf"kerasenv build {re.escape(v.id)} --jupyter-only\b", lanes), v.id
        assert re.search(rf"pytest smoke_tests --variant {re.escape(v.id)}\b", lanes), v.id
    assert re.search(r"pytest tests -m 'not docker'", lanes) and re.search(r"pytest tests -m docker\b", lanes)
    assert lanes.index("pytest tests -m 'not docker'") < lanes.index("pytest smoke_tests --variant")  # unit first
    # Two test lanes: each acceptance step waits for its build and for the acceptance two before
    # it in build order (the first two for their builds only: the first after the unit tests).
    rules = dict(re.findall(r"^test-accept-(\S+): (.+)$", subprocess.run(
        ["make", "-pn", "test-lanes"], cwd=REPO, capture_output=True, text=True).stdout, re.M))
    built = re.findall(r"kerasenv build (\S+) (?!--jupyter-only|--platform)", lanes)
    assert sorted(built) == sorted(v.id for v in real_matrix.debian_based)
    # and the arm64 lane: each arm64 image built and its arm64_ci checks run on it
    for v in real_matrix.variants:
        if v.arm64:
            assert re.search(rf"kerasenv build {re.escape(v.id)} --platform linux/arm64\b", lanes), v.id
            assert re.search(rf"pytest smoke_tests --image kerasenv:{re.escape(v.id)}-arm64 -m arm64_ci\b", lanes), v.id
    for i, vid in enumerate(built):
        prereqs = rules[vid].split()
        assert prereqs[0] == f"test-build-{vid}", vid
        assert prereqs[1:] == ([f"test-accept-{built[i - 2]}"] if i >= 2 else
                               ["test-unit-lane-step"] if i == 0 else []), vid
    # Each built once (a handover drops the giver's cache without building: kerasenv drop-build-cache).
    # Not counted: the floor lane's build on the floor daemon (issue 43: `make test-floor`, a recursive
    # make that `make -n` runs too where test-prereqs started that daemon, as on CI).
    main_engine = "\n".join(line for line in lanes.splitlines() if "DOCKER_HOST=unix://" not in line)
    variants = re.findall(r"kerasenv build (\S+)(?! --jupyter-only| --platform)\s", main_engine)
    flavours = re.findall(r"kerasenv build (\S+) --jupyter-only\b", lanes)
    assert sorted(variants) == sorted(flavours) == sorted(v.id for v in real_matrix.debian_based)  # each once


def test_the_build_cache_kept_by_make_test_is_what_the_integration_tests_rebuild():
    """`make test` drops the builder stages of every variant but BUILD_CACHE_KEPT; the
    integration tests rebuild exactly BUILT_IN_TESTS, which must be cached to be quick."""
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    built = ast.literal_eval(re.search(r"^BUILT_IN_TESTS = (.+)$", conftest, re.M).group(1))
    kept = re.search(r"^BUILD_CACHE_KEPT := (.+)$", MAKEFILE, re.M).group(1).split()
    assert sorted(kept) == sorted(built)
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout
    givers = {pair.split(":")[0] for pair in handover()}
    builds = [x for x in lanes.splitlines() if "kerasenv build " in x]
    for line in builds:
        variant = re.search(r"kerasenv build (\S+)", line).group(1)
        if variant in givers and "--jupyter-only" not in line:
            assert "--drop-build-cache" not in line, line  # dropped after the taker: the handover test below
            continue
        assert ("--drop-build-cache" in line) is (variant not in kept), line


def handover() -> list[str]:
    return re.search(r"^CUDA_LAYER_HANDOVER := (.*)$", MAKEFILE, re.M).group(1).split()


def test_variants_with_one_cuda_lock_hand_the_build_cache_over_and_drop_it_after(real_matrix):
    """Every pair of variants with byte-identical CUDA locks is a CUDA_LAYER_HANDOVER pair (in
    build order): the first keeps its cache for the second's cuda-libs stage, so they share the
    CUDA layer; after the second is built both caches go (the first's by `kerasenv
    drop-build-cache`, from what its build noted, without building it again)."""
    locks = {}
    for v in real_matrix.debian_based:
        path = REPO / "images" / v.id / "requirements-cuda.lock"
        if path.exists():
            locks.setdefault(path.read_bytes(), []).append(v.id)
    sharing = sorted(f"{ids[0]}:{taker}" for ids in locks.values() for taker in ids[1:])
    assert sorted(handover()) == sharing
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    steps = [x for x in lanes if ("kerasenv build " in x and "--jupyter-only" not in x) or "kerasenv drop-build-cache " in x]
    for pair in handover():
        giver, taker = pair.split(":")
        builds_of_giver = [i for i, x in enumerate(steps) if re.search(rf"kerasenv build {re.escape(giver)}\s", x)]
        taker_line = next(i for i, x in enumerate(steps) if re.search(rf"kerasenv build {re.escape(taker)}\s", x))
        assert len(builds_of_giver) == 1 and "--drop-build-cache" not in steps[builds_of_giver[0]]
        assert builds_of_giver[0] < taker_line  # the lanes build the giver first
        assert re.search(rf"kerasenv drop-build-cache {re.escape(giver)}(\s|$)", steps[taker_line + 1]), steps


def test_all_variants_means_every_variant_except_rocm(real_matrix):
    assert [v.id for v in real_matrix.debian_based] == [v.id for v in real_matrix.variants if v.family != "rocm"]
    assert {v.family for v in real_matrix.debian_based} == {"cpu", "cuda"}


def test_the_integration_tests_build_only_variants_ci_accepts(real_matrix):
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    built = ast.literal_eval(re.search(r"^BUILT_IN_TESTS = (.+)$", conftest, re.M).group(1))
    assert set(built) <= {v.id for v in real_matrix.debian_based}

def test_make_test_installs_its_prerequisites_first():
    """Issue 15: on a fresh machine `make test` itself installs and starts what the suite
    needs (scripts/test-prereqs.sh), before the first step that needs any of it."""
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert "bash scripts/test-prereqs.sh" in recipe[0]
    assert re.search(r"^test-prereqs:.*## ", MAKEFILE, re.M)


def ca_seen_by_make_test(**env: str) -> str:
    """KERASENV_CA_CERT as the recipes of `make test` see it: a probe added in front of
    test-prereqs prints it and stops make before anything runs."""
    base = {k: v for k, v in os.environ.items()
            if k not in ("KERASENV_CA_CERT", "PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "MAKEFLAGS")}
    proc = subprocess.run(["make", "--no-print-directory", "--eval", "test-prereqs: ca-probe",
                           "--eval", "ca-probe: ; @echo \"CA=$$KERASENV_CA_CERT\"; exit 3", "test"],
                          cwd=REPO, capture_output=True, text=True, env={**base, **env})
    assert proc.returncode != 0, "the probe must stop make"
    return next(line for line in proc.stdout.splitlines() if line.startswith("CA="))[3:]


def test_make_test_passes_the_proxy_ca_to_every_build_it_starts():
    """The host's bundle when nothing names a CA (what .ci/run exported), else the CA the
    tool would pick itself, in its order."""
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    assert ca_seen_by_make_test() == (bundle if os.path.exists(bundle) else "")
    assert ca_seen_by_make_test(SSL_CERT_FILE="/s.pem", PIP_CERT="/p.pem") == "/p.pem"
    assert ca_seen_by_make_test(KERASENV_CA_CERT="/k.pem", PIP_CERT="/p.pem") == "/k.pem"


def test_ci_runs_the_readme_test_command_and_installs_nothing_itself():
    """One implementation of the set-up: .ci/run keeps only what is CI's own (timing, disk
    sampling, the final clean) and leaves the rest to `make test-prereqs` / `make test`."""
    ci = (REPO / ".ci" / "run").read_text()
    code = "\n".join(line for line in ci.splitlines() if not line.lstrip().startswith("#"))
    assert "make --no-print-directory test-prereqs" in code
    assert re.search(r"^make --no-print-directory test PYTEST_ARGS=", code, re.M)
    for setup in ("apt-get", "npm ", "dockerd", "base-offline", "compose-plugin", "KERASENV_CA_CERT"):
        assert setup not in code, setup


def test_every_make_target_has_a_cheap_test_in_the_integration_suite():
    """Issue 21: `make bench-container` ran a moved script for weeks and no test ran it. Each
    target `make help` lists needs an entry in TARGETS of tests/integration/test_make_targets.py
    (how it is exercised) and a test there that names it in `covers(...)`; a TODO entry fails."""
    path = REPO / "tests" / "integration" / "test_make_targets.py"
    tree = ast.parse(path.read_text())
    assigned = {node.targets[0].id: node.value for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    todo = ast.literal_eval(assigned["TODO"])
    table = {ast.literal_eval(k): v for k, v in zip(assigned["TARGETS"].keys, assigned["TARGETS"].values)}
    how = {t: todo if isinstance(v, ast.Name) and v.id == "TODO" else ast.literal_eval(v) for t, v in table.items()}
    covered = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "covers":
            for arg in node.args:  # "name", or *NAMES of a module-level dict or list
                starred = isinstance(arg, ast.Starred)
                covered |= set(ast.literal_eval(assigned[arg.value.id]) if starred else [ast.literal_eval(arg)])
    help_text = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True,
                               text=True, check=True).stdout
    listed = set(re.findall(r"^  make (\S+) ", help_text, re.M))
    assert listed, help_text
    missing, stale = sorted(listed - set(how)), sorted(set(how) - listed)
    assert not missing, f"targets of `make help` with no entry in TARGETS ({path.name}): {missing}"
    assert not stale, f"TARGETS names targets `make help` does not list: {stale}"
    untested = sorted(t for t in listed - covered if how[t] != todo)
    assert not untested, f"in TARGETS, but no test in {path.name} covers(...) them: {untested}"
    todo_left = sorted(t for t in listed if how[t] == todo)
    assert not todo_left, f"not covered yet (TODO in {path.name}): {', '.join(todo_left)}"


def test_images_dropped_after_acceptance_are_none_an_integration_test_runs(real_matrix):
    """DROP_TESTED_IMAGES removes a variant's image and flavour after its acceptance run unless
    IMAGES_FOR_INTEGRATION lists it: every variant and flavour the integration tests name must be
    listed (named as `kerasenv:<ref>` or as a quoted variant id, e.g. in a parametrize list), or
    be the image of a lane_image(<id>) marker of that file (run in its lane before the drop)."""
    conftest = (REPO / "tests" / "integration" / "conftest.py").read_text()
    listed = ast.literal_eval(re.search(r"^IMAGES_FOR_INTEGRATION = (.+?\))$", conftest, re.M | re.S).group(1))
    kept = re.search(r"^IMAGES_FOR_INTEGRATION := ((?:.*\\\n)*.*)$", MAKEFILE, re.M).group(1).replace("\\\n", " ").split()
    assert sorted(kept) == sorted(listed)
    ids = {v.id for v in real_matrix.debian_based}
    refs = ids | {f"{i}-jupyter" for i in ids}
    named = set()
    for path in (REPO / "tests" / "integration").rglob("*.py"):
        text = path.read_text()
        in_file = {r for r in re.findall(r"kerasenv:([a-z0-9][a-z0-9._-]*)", text) if r in refs}
        in_file |= {i for i in ids if f'"{i}"' in text}
        named |= in_file - set(re.findall(r'lane_image\("([^"]+)"\)', text))
    assert named <= set(listed), sorted(named - set(listed))
    assert set(BUILT_IN_TESTS_OF(conftest)) <= set(listed)
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes", "DROP_TESTED_IMAGES=1"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout
    dropped = {ref for line in re.findall(r"docker rmi ([^>]+)>", lanes) for ref in line.split()}
    arm64 = {f"kerasenv:{v.id}-arm64" for v in real_matrix.variants if v.arm64}
    kept = {r for i in (real_matrix.default_cpu, real_matrix.default_gpu) for r in (i, f"{i}-jupyter")}
    assert dropped == {f"kerasenv:{r}" for r in refs - set(listed) - kept} | arm64
    # Without the variable: not even inherited from a `make test DROP_TESTED_IMAGES=1` running this
    # test (.ci/run's), which passes it to sub-makes through MAKEFLAGS and the environment.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DROP_TESTED_IMAGES")}
    plain = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, env=env,
                           capture_output=True, text=True, check=True).stdout
    assert "docker rmi" not in plain


def BUILT_IN_TESTS_OF(conftest: str) -> tuple:
    return ast.literal_eval(re.search(r"^BUILT_IN_TESTS = (.+)$", conftest, re.M).group(1))


def test_the_lanes_build_the_quickest_image_first_then_the_matrix_order(real_matrix):
    """The test lane waits for the first image after the unit tests: the JAX CPU image builds in
    half the time of the default CPU image. The rest keep the matrix's order."""
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout
    built = re.findall(r"timed-step 'build (\S+)' ", lanes)
    variants = [b for b in built if not b.endswith(("-jupyter", "-arm64"))]
    first = re.search(r"^FIRST_BUILT := (\S+)$", MAKEFILE, re.M).group(1)
    assert variants == [first] + [v.id for v in real_matrix.debian_based if v.id != first]
    assert real_matrix.get(first).family == "cpu"


def test_the_integration_tests_run_once_each_split_between_the_lanes():
    """The build lane runs every integration test but INTEGRATION_IN_TEST_LANE, which the test
    lane runs after its last acceptance run: each test once, none left out. Those in the test
    lane run beside the build lane's: none may use an image the registry test untags and pulls
    back, nor label its containers with io.kerasenv.kind (the build lane's `make clean` would
    remove them)."""
    # Not the PYTEST_ARGS of the `make test` this may run under (MAKEFLAGS reach a sub-make).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTEST_ARGS")}
    lanes = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                           text=True, check=True, env=env).stdout
    in_test_lane = re.search(r"^INTEGRATION_IN_TEST_LANE := (.+)$", MAKEFILE, re.M).group(1).split()
    build_lane = re.search(r"pytest tests -m 'docker and not lane_image' (.*?)\s*\|\|", lanes).group(1).split()
    assert build_lane == [f"--ignore={path}" for path in in_test_lane]
    assert re.search(rf"pytest {re.escape(' '.join(in_test_lane))} -m 'docker and not lane_image'", lanes)
    registry = (REPO / "tests" / "integration" / "test_registry.py").read_text()
    pushed = ast.literal_eval(re.search(r"^PUSHED = (.+)$", registry, re.M).group(1))
    untagged = (pushed,) if isinstance(pushed, str) else pushed
    for path in in_test_lane:
        text = (REPO / path).read_text()
        assert '"io.kerasenv.kind"' not in text, path  # as a label key
        if path == "tests/integration/test_apptainer.py":
            # It runs the SIF the sif step made from kerasenv:jax0.12-cpu (KERASENV_APPTAINER_TEST_SIF,
            # given by the test lane's step), and asks for that image only when no SIF is given.
            assert re.search(r"'integration tests \(test lane\)' env KERASENV_APPTAINER_TEST_SIF=\S+\.sif ", lanes)
            fixture = re.search(r"^def sif\(request\):\n(.*?)^\n", text, re.M | re.S).group(1)
            assert fixture.index("if given:") < fixture.index('request.getfixturevalue("jax_cpu_image")'), fixture
            assert "jax_cpu_image" not in re.sub(r"^def sif\(request\):\n.*?^\n", "", text, flags=re.M | re.S), path
            continue
        assert not any(f'"{variant}"' in text or f"kerasenv:{variant}" in text for variant in untagged), path


def test_make_test_keeps_only_the_default_images_unless_told_otherwise(real_matrix):
    """A fresh machine's `make test` kept every image it built (+60.6 GB of its ~80 GB free before the
    arm64 images): now it drops each once tested and, at the end, the integration tests' images too,
    keeping the defaults (KEEP_IMAGES) with their flavours; KEEP_IMAGES=all keeps everything."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "DROP_TESTED_IMAGES",
                                                          "KEEP_IMAGES")}
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "test"], cwd=REPO, env=env, capture_output=True,
                            text=True, check=True).stdout
    final = re.search(r"^for ref in (.+?); do .*docker rmi", recipe, re.M).group(1).split()
    defaults = {f"kerasenv:{i}{s}" for i in (real_matrix.default_cpu, real_matrix.default_gpu) for s in ("", "-jupyter")}
    assert final and not set(final) & defaults
    assert "kerasenv:jax0.12-cpu" in final
    assert re.search(r"docker rmi kerasenv:\S+-arm64", recipe)
    everything = subprocess.run(["make", "--no-print-directory", "-n", "test", "KEEP_IMAGES=all"], cwd=REPO, env=env,
                                capture_output=True, text=True, check=True).stdout
    assert "docker rmi" not in everything


def test_lane_image_tests_run_in_their_variants_lane_before_its_image_goes(real_matrix):
    """The tests marked lane_image(<id>) run right after <id>'s acceptance run, before its image
    is dropped, and in none of the integration steps at the end (which run without that image)."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/integration", "--collect-only", "-q", "-m", "lane_image"],
        cwd=REPO, capture_output=True, text=True)
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    marked = set()
    for path in (REPO / "tests" / "integration").glob("*.py"):
        marked |= set(re.findall(r'lane_image\("([^"]+)"\)', path.read_text()))
    lane_variants = subprocess.run(["make", "--no-print-directory", "-s", "--eval", "lanes-of-images: ; @echo $(LANE_IMAGE_VARIANTS)",
                                    "lanes-of-images"], cwd=REPO,
                                   capture_output=True, text=True, check=True).stdout.split()
    assert sorted(lane_variants) == sorted(marked) and marked, (lane_variants, marked)
    assert marked <= {v.id for v in real_matrix.debian_based}
    assert re.search(r"(\d+)/\d+ tests collected", collected.stdout), collected.stdout[-500:]
    steps = subprocess.run(["make", "--no-print-directory", "-n", "test-lanes", "DROP_TESTED_IMAGES=1"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for v in marked:
        run = next(n for n, line in enumerate(steps) if f"--lane-image {v} " in line)
        accept = next(n for n, line in enumerate(steps) if f"smoke_tests --variant {v} " in line)
        drop = next(n for n, line in enumerate(steps) if line.startswith("docker rmi") and f"kerasenv:{v} " in line + " ")
        assert accept < run < drop, (v, accept, run, drop)
    finals = [line for line in steps if "'integration tests" in line and "--lane-image" not in line]
    assert len(finals) == 2 and all("-m 'docker and not lane_image'" in line for line in finals), finals


def test_make_help_lists_the_buildable_ids_and_the_retired_ones_apart(real_matrix):
    """Issue 45: `make help` is derived from the matrix (scripts/help-matrix.awk): the title names
    the backends, "Variants:" only ids that build, the retired ids under their own word."""
    out = subprocess.run(["make", "--no-print-directory", "help"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines()[0] == ("kerasenv: Keras images on TensorFlow, JAX and PyTorch (CPU, CUDA and ROCm) "
                                   "that prove they work on your GPU")
    variants = next(line for line in out.splitlines() if line.startswith("Variants: "))
    assert variants.split()[1:] == list(real_matrix.ids)
    retired = next(line for line in out.splitlines() if line.startswith("Retired "))
    assert real_matrix.retired and all(f"{r.id} (now {r.replaced_by})" in retired for r in real_matrix.retired)
    assert not {r.id for r in real_matrix.retired} & set(variants.split())


def _variable(name: str) -> str:
    """A Makefile variable's value, from make's own database."""
    db = subprocess.run(["make", "--no-print-directory", "-p", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                        text=True, check=True).stdout
    match = re.search(rf"^{name} :?= ?(.*)$", db, re.M)
    assert match, f"no {name} in the Makefile"
    return match.group(1)


def _prerequisites() -> dict[str, list[str]]:
    """Each target of `make test-lanes` and its prerequisites, from make's own database."""
    db = subprocess.run(["make", "--no-print-directory", "-p", "-n", "test-lanes"], cwd=REPO, capture_output=True,
                        text=True, check=True).stdout
    return {m.group(1): m.group(2).split() for m in re.finditer(r"^(test-[\w.-]+):(?!=)(.*)$", db, re.M)}


def test_each_arm64_image_is_a_chain_of_its_own_one_beside_the_build_lanes_integration_tests(real_matrix):
    """The arm64 builds run side by side, each image's checks right after its own build: not one
    build after the other, not one image's checks after another's (a core sat idle for most of
    the arm64 tail that way). ARM64_EARLY's chain starts once the test lanes are done, beside the
    build lane's integration tests (both of today's images); any other once every amd64 step is done."""
    deps = _prerequisites()
    arm64 = [v.id for v in real_matrix.variants if v.arm64]
    assert arm64, "no arm64 image in the matrix"
    early = _variable("ARM64_EARLY").split()
    assert early and set(early) <= set(arm64), early  # a name that is no arm64 image would start nothing
    for v in arm64:
        build = deps[f"test-arm64-build-{v}"]
        assert "test-integration-test-lane-step" in build, build
        assert ("test-integration-lane-step" in build) is (v not in early), build
        assert [d for d in build if d.startswith("test-accept-")], build  # after the last acceptance runs
        assert not [d for d in build if d.startswith("test-arm64-build-")], build
        assert deps[f"test-arm64-{v}"] == [f"test-arm64-build-{v}"], deps[f"test-arm64-{v}"]
        assert f"test-arm64-{v}" in deps["test-lanes"]
