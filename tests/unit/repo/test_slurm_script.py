"""slurm/kerasenv-jax.sbatch without Slurm or Docker: its syntax, its #SBATCH defaults, and
the `docker run` each task gives its container, with the task environments recorded on a real
Slurm (tests/fixtures/slurm/) and stand-ins for srun, scontrol and docker. What JAX derives from
those environments is computed here the way docs/using/multi-worker.md describes it
(jax/_src/clusters/slurm_cluster.py). The real run: tests/integration/test_slurm.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ..conftest import REPO

SCRIPT = REPO / "slurm" / "kerasenv-jax.sbatch"
SETUP = REPO / "scripts" / "slurm-local.sh"
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
# What jax.distributed.initialize() needs to see to take the job for a Slurm one.
JAX_SLURM_VARIABLES = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID", "SLURM_LOCALID")


def task_env(index: int) -> dict[str, str]:
    lines = (FIXTURES / f"task-env-{index}.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def jax_view(env: dict[str, str]) -> dict:
    """What JAX 0.12's Slurm detection derives from a task's environment: the coordinator is the
    first host of SLURM_STEP_NODELIST ("a,b" -> a; "node[001-004,9]" -> node001) at port
    SLURM_JOB_ID % 4096 + 61440 (JAX_COORDINATOR_PORT overrides it), one local device per process."""
    if not all(name in env for name in JAX_SLURM_VARIABLES):
        return {}
    nodes = env["SLURM_STEP_NODELIST"]
    head = re.match(r"[^,\[]*", nodes).group(0)
    if nodes[len(head):].startswith("["):
        head += re.match(r"[^,\-\]]*", nodes[len(head) + 1:]).group(0)
    port = env.get("JAX_COORDINATOR_PORT") or str(int(env["SLURM_JOB_ID"]) % 2**12 + (65535 - 2**12 + 1))
    local = env.get("JAX_LOCAL_DEVICE_IDS")
    return {"coordinator": f"{head}:{port}", "processes": int(env["SLURM_NTASKS"]),
            "process_id": int(env["SLURM_PROCID"]),
            "local_device_ids": [int(i) for i in local.split(",")] if local else [int(env["SLURM_LOCALID"])]}


def test_the_scripts_parse():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    subprocess.run(["bash", "-n", str(SETUP)], check=True)


def test_the_sbatch_defaults():
    directives = dict(re.findall(r"^#SBATCH --([a-z-]+)=(\S+)$", SCRIPT.read_text(), re.M))
    assert directives["ntasks"] == "2" and directives["cpus-per-task"] == "1"
    assert re.fullmatch(r"\d\d:\d\d:\d\d", directives["time"])
    assert directives["output"] == "kerasenv-jax-%j.out"


def test_the_script_passes_the_slurm_variables_and_labels_its_containers():
    text = SCRIPT.read_text()
    assert "env | grep -E '^(SLURM|JAX)_'" in text and '--env-file "$envfile"' in text
    for label in ("io.kerasenv.kind=slurm", "io.kerasenv.project=kerasenv", 'io.kerasenv.slurm-job=$SLURM_JOB_ID'):
        assert f"--label {label}" in text or f'--label "{label}"' in text, label
    assert '--name "$name"' in text and 'name="kerasenv-slurm-${SLURM_JOB_ID}-${SLURM_PROCID}"' in text
    assert re.search(r"^trap 'on_signal SIGTERM 143' TERM$", text, re.M)


def test_the_recorded_tasks_form_one_jax_job():
    views = [jax_view(task_env(i)) for i in (0, 1)]
    assert all(views), "a recorded task lacks one of JAX's Slurm variables"
    job = task_env(0)["SLURM_JOB_ID"]
    assert {v["coordinator"] for v in views} == {f"vm:{int(job) % 4096 + 61440}"}
    assert [v["process_id"] for v in views] == [0, 1]
    assert {v["processes"] for v in views} == {2}
    assert [v["local_device_ids"] for v in views] == [[0], [1]]


@pytest.mark.parametrize("nodes, head", [("vm", "vm"), ("a,b", "a"), ("node[001-004],gpu7", "node001"),
                                         ("node[007,009-012]", "node007")])
def test_the_coordinator_is_the_first_node_of_the_step(nodes, head):
    env = {**task_env(0), "SLURM_STEP_NODELIST": nodes, "SLURM_JOB_ID": "4097"}
    assert jax_view(env)["coordinator"] == f"{head}:61441"


def test_the_port_formula_is_the_one_the_script_and_the_docs_state():
    assert "SLURM_JOB_ID % 4096 + 61440" in SCRIPT.read_text()
    assert "SLURM_JOB_ID % 4096 + 61440" in (REPO / "docs" / "using" / "multi-worker.md").read_text()


# --- the script run with stand-ins ----------------------------------------------------------

FAKE_SRUN = r"""#!/bin/bash
# srun's stand-in: each recorded task environment (FAKE_TASKS: files) runs the command once,
# in the background, with the batch environment plus that task's SLURM_* variables.
while [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
pids=()
for f in $FAKE_TASKS; do
  ( while IFS= read -r line; do
      case "$line" in ''|'#'*) ;; *) export "$line" ;; esac
    done < "$f"
    exec "$@" ) &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
"""

FAKE_SCONTROL = """#!/bin/bash
[ "$1 $2" = "show hostnames" ] && tr ',' '\\n' <<< "$3"
"""

FAKE_DOCKER = r"""#!/bin/bash
# docker's stand-in: every call logged (NUL-separated argv), `run` keeps a "container" file
# holding its labels until it ends (FAKE_RUN_S seconds, or SIGTERM), `rm` removes such files.
state=$FAKE_DOCKER_STATE
mkdir -p "$state/containers"
printf '%s\0' "$@" > "$(mktemp "$state/call-XXXXXX")"
case "$1" in
  ps) grep -l -x -F "${4#label=}" "$state"/containers/* 2>/dev/null | xargs -r -n1 basename ;;
  rm) shift; [ "$1" = -f ] && shift; for c in "$@"; do rm -f "$state/containers/$c"; done ;;
  run)
    args=("$@")
    for ((i = 0; i < ${#args[@]}; i++)); do
      case "${args[i]}" in --name) name=${args[i+1]} ;; --env-file) envfile=${args[i+1]} ;; esac
    done
    printf '%s\n' "${args[@]}" | grep '^io\.kerasenv\.' > "$state/containers/$name"
    printf '%s\0' "$@" > "$state/run-$name.argv"
    cp "$envfile" "$state/run-$name.env"
    trap 'rm -f "$state/containers/$name"; exit 143' TERM
    sleep "${FAKE_RUN_S:-0}" & wait $!
    rm -f "$state/containers/$name" ;;
esac
exit 0
"""


@pytest.fixture
def fake_cluster(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    state = tmp_path / "docker"
    job = task_env(0)
    # The batch step's environment: the job's variables, not a task's (srun adds those).
    batch = {k: v for k, v in job.items() if k in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NTASKS",
                                                   "SLURM_CPUS_PER_TASK", "SLURM_JOB_NAME", "SLURM_CLUSTER_NAME")}
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "FAKE_DOCKER_STATE": str(state), "FAKE_TASKS": f"{FIXTURES / 'task-env-0.txt'} {FIXTURES / 'task-env-1.txt'}",
           "SLURM_SUBMIT_DIR": str(tmp_path), **batch}

    def run(*args: str, extra: dict | None = None, **kwargs):
        return subprocess.Popen(["bash", str(SCRIPT), *args], cwd=tmp_path, env={**env, **(extra or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)

    def runs() -> dict[str, tuple[list[str], list[str]]]:
        """container name -> (docker run's argv, its env-file's lines)"""
        return {p.name[len("run-"):-len(".argv")]: (p.read_text().split("\0")[:-1],
                                                    p.with_suffix(".env").read_text().splitlines())
                for p in state.glob("run-*.argv")}

    def calls() -> list[list[str]]:
        return [p.read_text().split("\0")[:-1] for p in state.glob("call-*")]

    run.runs, run.calls, run.state, run.job, run.tmp = runs, calls, state, job["SLURM_JOB_ID"], tmp_path
    return run


def option(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_each_task_runs_one_container_with_its_own_slurm_variables(fake_cluster):
    proc = fake_cluster(extra={"KERASENV_SMOKE_ARGS": "--epochs 2"})
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    job = fake_cluster.job
    assert f"JAX's coordinator: vm:{int(job) % 4096 + 61440}" in out
    runs = fake_cluster.runs()
    assert sorted(runs) == [f"kerasenv-slurm-{job}-0", f"kerasenv-slurm-{job}-1"]
    for index in (0, 1):
        argv, env_lines = runs[f"kerasenv-slurm-{job}-{index}"]
        recorded = task_env(index)
        # every SLURM_* variable of the task, exactly, and the CPU device count
        assert sorted(line for line in env_lines if line.startswith("SLURM_")) == sorted(f"{k}={v}" for k, v in recorded.items())
        assert "JAX_NUM_CPU_DEVICES=1" in env_lines
        assert jax_view(dict(line.split("=", 1) for line in env_lines))["process_id"] == index
        assert argv[:5] == ["run", "--rm", "--init", "--network", "host"]
        assert option(argv, "--name") == [f"kerasenv-slurm-{job}-{index}"]
        labels = option(argv, "--label")
        assert {"io.kerasenv.kind=slurm", "io.kerasenv.project=kerasenv", f"io.kerasenv.slurm-job={job}",
                f"io.kerasenv.slurm-task={index}"} <= set(labels)
        assert any(label.startswith("io.kerasenv.cli-pid=") for label in labels)
        assert option(argv, "--user") == [f"{os.getuid()}:{os.getgid()}"]
        assert option(argv, "-v") == [f"{fake_cluster.tmp}/runs:/workspace/runs"]
        assert "--gpus" not in argv
        image = argv.index("kerasenv:jax0.12-cpu")
        assert argv[image + 1:] == ["python", "/opt/kerasenv/smoke_train.py", "--run-id", job,
                                    "--output-dir", f"/workspace/runs/{job}", "--epochs", "2"]
    assert not list((fake_cluster.state / "containers").iterdir())
    assert not list(fake_cluster.tmp.glob("kerasenv-slurm-*")), "an env file was left behind"


def test_a_gpu_per_task_and_jax_told_its_index_in_the_container(fake_cluster):
    proc = fake_cluster("python", "/workspace/train.py",
                        extra={"KERASENV_GPUS": "1", "KERASENV_IMAGE": "kerasenv:jax0.12-cuda12.9",
                               "KERASENV_PROJECT_DIR": "/src", "KERASENV_DOCKER_ARGS": "--cpus 1"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    for index in (0, 1):
        argv, env_lines = fake_cluster.runs()[f"kerasenv-slurm-{fake_cluster.job}-{index}"]
        assert option(argv, "--gpus") == [f"device={index}"]  # SLURM_LOCALID
        assert "JAX_LOCAL_DEVICE_IDS=0" in env_lines
        assert jax_view(dict(line.split("=", 1) for line in env_lines))["local_device_ids"] == [0]
        assert option(argv, "-v") == ["/src:/workspace", f"{fake_cluster.tmp}/runs:/workspace/runs"]
        assert option(argv, "--cpus") == ["1"]
        assert argv[argv.index("kerasenv:jax0.12-cuda12.9") + 1:] == ["python", "/workspace/train.py"]


def test_where_slurm_allocates_gpus_each_task_gets_its_entry_of_the_step_gpus(fake_cluster):
    proc = fake_cluster(extra={"KERASENV_GPUS": "1", "SLURM_STEP_GPUS": "2,3"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    devices = [option(fake_cluster.runs()[f"kerasenv-slurm-{fake_cluster.job}-{i}"][0], "--gpus") for i in (0, 1)]
    assert devices == [["device=2"], ["device=3"]]


def test_sigterm_removes_the_containers_of_the_job(fake_cluster):
    """What scancel does (SIGTERM to every process of the job, SIGKILL after KillWait): the
    tasks and the script remove the containers at once."""
    proc = fake_cluster(extra={"FAKE_RUN_S": "120"}, start_new_session=True)
    containers = fake_cluster.state / "containers"
    deadline = time.monotonic() + 30
    while not (containers.is_dir() and len(list(containers.iterdir())) == 2):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 143, err
    assert "SIGTERM: removing the job's containers" in err
    assert not list(containers.iterdir())
    job = fake_cluster.job
    calls = fake_cluster.calls()
    assert ["ps", "-aq", "--filter", f"label=io.kerasenv.slurm-job={job}"] in calls
    assert {f"kerasenv-slurm-{job}-0", f"kerasenv-slurm-{job}-1"} <= {c[2] for c in calls if c[:2] == ["rm", "-f"]}


def test_outside_a_job_it_says_to_use_sbatch(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "submit this with sbatch" in proc.stderr
