"""The Kubernetes manifests for Keras on JAX across hosts (k8s/jax-multihost-job.yaml, an Indexed
Job with a headless Service; k8s/jax-multihost-jobset.yaml, a JobSet): what each pod would get,
worked out offline the way the Job and JobSet controllers do it, so that every process dials the
same coordinator, process 0's DNS name, and the ids are 0..N-1.

`pod_environments(path)` and `pod_hostnames(path)` are for other tests too (an integration test
can start one container per pod with these environments):

    from tests.unit.repo.test_k8s_jax import pod_environments, pod_hostnames

What the controllers do, as modelled here:
- Job (Indexed): pod i gets the annotation and label batch.kubernetes.io/job-completion-index=i,
  the env JOB_COMPLETION_INDEX, the labels job-name and batch.kubernetes.io/job-name, and the
  hostname <job>-<i> (kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode).
  With spec.subdomain = a headless Service's name its DNS name is <hostname>.<subdomain>.
- JobSet (kubernetes-sigs/jobset v0.12.0): replicatedJob r's Job j is named <jobset>-<r>-<j>
  (pkg/util/placement/placement.go, GenJobName), its pods carry the label and annotation
  jobset.sigs.k8s.io/jobset-name (and replicatedjob-name, job-index, job-global-index), and with
  network.enableDNSHostnames (default true, pkg/webhooks/jobset_webhook.go) their subdomain is
  network.subdomain or the JobSet's name, served by a headless Service of that name selecting
  jobset.sigs.k8s.io/jobset-name (pkg/controllers/jobset_controller.go).
- Kubeflow Trainer v2's jax-distributed runtime (kubeflow/trainer v2.3.0,
  pkg/runtime/framework/plugins/jax/jax.go): a JobSet named after the TrainJob with one
  replicatedJob "node", and JAX_NUM_PROCESSES, JAX_PROCESS_ID (the completion index) and
  JAX_COORDINATOR_ADDRESS=<trainjob>-node-0-0.<trainjob>:29500 in the "node" container.
"""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
JOB = REPO / "k8s" / "jax-multihost-job.yaml"
JOBSET = REPO / "k8s" / "jax-multihost-jobset.yaml"
JOBSET_SCHEMA = REPO / "k8s" / "schemas" / "jobset.x-k8s.io_jobset_v1alpha2.json"
MANIFESTS = [JOB, JOBSET]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
COORDINATOR_PORT = 1234
KERAS_VARS = ("KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES", "KERAS_DISTRIBUTION_PROCESS_ID")
# What gRPC (under jax.distributed) takes a proxy from: grpc/grpc
# src/core/handshaker/http_connect/http_proxy_mapper.cc (lower case only); the upper-case and
# all_proxy ones for the other tools in the image.
PROXY_VARS = {"grpc_proxy", "https_proxy", "http_proxy", "all_proxy"}
# kubeflow/trainer v2.3.0: pkg/constants/constants.go (Node = "node", ContainerTrainerPort = 29500)
KUBEFLOW_NODE = "node"
KUBEFLOW_PORT = 29500


@dataclass
class Pod:
    """One pod as the controllers would create it (only what the environment and DNS depend on)."""
    hostname: str
    subdomain: str | None
    labels: dict[str, str]
    annotations: dict[str, str]
    spec: dict  # the pod template's spec
    service: dict | None = None  # the headless Service its subdomain names (the manifest's, or JobSet's own)
    job: dict = field(default_factory=dict)  # the Job spec it belongs to

    @property
    def dns_name(self) -> str:
        return f"{self.hostname}.{self.subdomain}" if self.subdomain else self.hostname


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _indexed_job_pods(job_name: str, job_spec: dict, extra_labels: dict, extra_annotations: dict,
                      subdomain: str | None, service: dict | None) -> list[Pod]:
    assert job_spec.get("completionMode") == "Indexed", f"{job_name}: the pods get no completion index"
    template = job_spec["template"]
    meta = template.get("metadata") or {}
    pods = []
    for index in range(job_spec["completions"]):
        labels = {**(meta.get("labels") or {}), **extra_labels,
                  "job-name": job_name, "batch.kubernetes.io/job-name": job_name, COMPLETION_INDEX: str(index)}
        annotations = {**(meta.get("annotations") or {}), **extra_annotations, COMPLETION_INDEX: str(index)}
        pods.append(Pod(f"{job_name}-{index}", subdomain, labels, annotations, template["spec"], service, job_spec))
    return pods


def pods(manifest_path: Path | str) -> list[Pod]:
    """Every pod of the manifest's Job or JobSet, in process order (the JobSet's Jobs by global index)."""
    docs = _docs(Path(manifest_path))
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    out: list[Pod] = []
    for doc in docs:
        if doc["kind"] == "Job":
            name, spec = doc["metadata"]["name"], doc["spec"]
            subdomain = spec["template"]["spec"].get("subdomain")
            out += _indexed_job_pods(name, spec, {}, {}, subdomain, services.get(subdomain))
        elif doc["kind"] == "JobSet":
            js = doc["metadata"]["name"]
            network = doc["spec"].get("network") or {}
            dns = network.get("enableDNSHostnames", True)  # the webhook's default
            subdomain = (network.get("subdomain") or js) if dns else None
            service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": subdomain},
                       "spec": {"clusterIP": "None", "selector": {JOBSET_NAME: js},
                                "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True)}} \
                if dns else None
            global_index = 0
            for rjob in doc["spec"]["replicatedJobs"]:
                for job_index in range(rjob.get("replicas", 1)):
                    marks = {JOBSET_NAME: js, "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                             "jobset.sigs.k8s.io/job-index": str(job_index),
                             "jobset.sigs.k8s.io/job-global-index": str(global_index)}
                    spec = rjob["template"]["spec"]
                    spec = {**spec, "completionMode": spec.get("completionMode", "Indexed")}  # webhook default
                    out += _indexed_job_pods(f"{js}-{rjob['name']}-{job_index}", spec, marks, marks, subdomain, service)
                    global_index += 1
    return out


_FIELD = re.compile(r"^metadata\.(labels|annotations)\['([^']+)'\]$")


def _field(pod: Pod, path: str) -> str:
    if path == "metadata.name":  # the Job controller generates it: <job>-<index>-<random>
        return f"{pod.hostname}-xxxxx"
    m = _FIELD.match(path)
    assert m, f"fieldRef {path!r} is not modelled here"
    values = pod.labels if m[1] == "labels" else pod.annotations
    assert m[2] in values, f"fieldRef {path!r}: the pod has no such {m[1][:-1]}"
    return values[m[2]]


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of earlier variables ($$ escapes, unknown names stay)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m[0] == "$$" else env.get(m[1], m[0]), value)


def container_environment(pod: Pod, container: dict) -> dict[str, str]:
    env: dict[str, str] = {}
    for var in container.get("env") or []:
        if "value" in var:
            env[var["name"]] = _expand(str(var["value"]), env)
        elif "fieldRef" in (var.get("valueFrom") or {}):
            env[var["name"]] = _field(pod, var["valueFrom"]["fieldRef"]["fieldPath"])
        else:
            raise AssertionError(f"env {var['name']}: only value and fieldRef are modelled here")
    if pod.job.get("completionMode") == "Indexed":
        env.setdefault("JOB_COMPLETION_INDEX", pod.annotations[COMPLETION_INDEX])  # the Job controller adds it
    return env


def pod_environments(manifest_path: Path | str) -> list[dict[str, str]]:
    """The environment of each pod's first container, in process order, fieldRefs resolved."""
    return [container_environment(p, p.spec["containers"][0]) for p in pods(manifest_path)]


def pod_hostnames(manifest_path: Path | str) -> list[str]:
    """Each pod's DNS name within its namespace, <hostname>.<subdomain>, in process order."""
    return [p.dns_name for p in pods(manifest_path)]


def kubeflow_jax_environments(trainjob: str, num_nodes: int) -> list[dict[str, str]]:
    """What Kubeflow Trainer v2.3.0's JAX plugin sets in each "node" pod (jax.go, EnforceMLPolicy)."""
    return [{"JAX_NUM_PROCESSES": str(num_nodes), "JAX_PROCESS_ID": str(i),
             "JAX_COORDINATOR_ADDRESS": f"{trainjob}-{KUBEFLOW_NODE}-0-0.{trainjob}:{KUBEFLOW_PORT}"}
            for i in range(num_nodes)]


def _split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _is_local(host: str) -> bool:
    if host.lower().startswith("localhost") or host.lower() == "ip6-localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def _no_proxy_covers(host: str, no_proxy: str) -> bool:
    """gRPC's reading: each entry matches as a case-insensitive suffix of the host name."""
    return any(host.lower().endswith(e.strip().lower()) for e in no_proxy.split(",") if e.strip())


# --- both manifests ----------------------------------------------------------------------------


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_every_process_dials_process_0s_dns_name_on_port_1234(manifest):
    envs, hosts = pod_environments(manifest), pod_hostnames(manifest)
    assert len(envs) == 2
    for env in envs:
        addresses = env["KERAS_DISTRIBUTION_JOB_ADDRESSES"].split(",")
        host, port = _split(addresses[0])  # Keras hands the first to jax.distributed as the coordinator
        assert (host, port) == (hosts[0], COORDINATOR_PORT)
        for address in addresses:
            assert not _is_local(_split(address)[0]), f"{address}: every other host would dial itself"
        if len(addresses) > 1:
            assert [_split(a)[0] for a in addresses] == hosts


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_process_ids_are_the_completion_indexes_and_the_count_is_the_jobs_size(manifest):
    all_pods, envs = pods(manifest), pod_environments(manifest)
    job = all_pods[0].job
    assert job["parallelism"] == job["completions"]  # every process at once: initialize waits for all
    assert [e["KERAS_DISTRIBUTION_PROCESS_ID"] for e in envs] == [str(i) for i in range(len(envs))]
    assert {e["KERAS_DISTRIBUTION_NUM_PROCESSES"] for e in envs} == {str(len(all_pods))}
    assert len(all_pods) == job["completions"]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_the_coordinator_name_is_a_headless_service_record_of_the_pods(manifest):
    for pod in pods(manifest):
        service = pod.service
        assert service is not None, f"{pod.hostname}: no headless Service for subdomain {pod.subdomain}"
        assert service["spec"]["clusterIP"] == "None"
        assert pod.subdomain == service["metadata"]["name"]
        selector = service["spec"]["selector"]
        assert selector and selector.items() <= pod.labels.items(), (selector, pod.labels)
        assert service["spec"].get("publishNotReadyAddresses") is True  # records before the pods are Ready
    coordinator = pods(manifest)[0]
    ports = {p["containerPort"] for c in coordinator.spec["containers"] for p in c.get("ports", [])}
    assert COORDINATOR_PORT in ports


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_no_proxy_variables_and_no_proxy_covers_the_coordinator(manifest):
    for env in pod_environments(manifest):
        assert not {n for n in env if n.lower() in PROXY_VARS}, "a proxy on the coordinator's path hangs the start"
        host, _ = _split(env["KERAS_DISTRIBUTION_JOB_ADDRESSES"].split(",")[0])
        assert _no_proxy_covers(host, env["no_proxy"]) and env["NO_PROXY"] == env["no_proxy"]


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_the_jax_cpu_image_runs_the_smoke_with_two_devices_per_process(manifest):
    for pod, env in zip(pods(manifest), pod_environments(manifest)):
        container = pod.spec["containers"][0]
        assert container["image"] == "kerasenv:jax0.12-cpu"
        assert container["command"] == ["python", "/opt/kerasenv/smoke_train.py"]
        assert env["JAX_NUM_CPU_DEVICES"] == "2"
        assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
        assert "memory" in container["resources"]["limits"]
        assert pod.spec["securityContext"]["runAsNonRoot"] is True
    text = Path(manifest).read_text()
    assert "jax0.12-cuda12.9" in text and "nvidia.com/gpu: 1" in text  # the GPU variant, in comments


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda p: p.name)
def test_a_failed_or_stuck_process_ends_the_job(manifest):
    pod = pods(manifest)[0]
    assert pod.job["backoffLimit"] == 0
    assert 0 < pod.job["activeDeadlineSeconds"] <= 6 * 3600
    assert pod.spec["restartPolicy"] == "Never"
    rules = pod.job["podFailurePolicy"]["rules"]
    assert any(r["action"] == "FailJob" and r["onExitCodes"] == {"containerName": "worker", "operator": "NotIn",
                                                                  "values": [0]} for r in rules)


# --- the Job -----------------------------------------------------------------------------------


def test_job_names_pods_job_index_dot_service():
    service, job = _docs(JOB)
    name = job["metadata"]["name"]
    assert service["kind"] == "Service" and job["kind"] == "Job"
    assert pod_hostnames(JOB) == [f"{name}-0.{service['metadata']['name']}", f"{name}-1.{service['metadata']['name']}"]
    assert job["spec"]["template"]["spec"]["subdomain"] == service["metadata"]["name"]


def test_job_validates_strictly_against_the_kubernetes_schema():
    validator = Path(sys.executable).parent / "kubernetes-validate"
    proc = subprocess.run([str(validator), "--strict", str(JOB)], capture_output=True, text=True)
    assert proc.returncode == 0 and "WARN" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# --- the JobSet --------------------------------------------------------------------------------


def test_jobset_hostnames_follow_jobsets_naming():
    (doc,) = _docs(JOBSET)
    js = doc["metadata"]["name"]
    assert doc["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    (rjob,) = doc["spec"]["replicatedJobs"]
    assert (rjob["name"], rjob["replicas"]) == ("workers", 1)
    assert pod_hostnames(JOBSET) == [f"{js}-workers-0-0.{js}", f"{js}-workers-0-1.{js}"]
    # JobSet's own CoordinatorEndpoint(): <jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>
    assert pod_environments(JOBSET)[0]["KERAS_DISTRIBUTION_JOB_ADDRESSES"] == f"{js}-workers-0-0.{js}:1234"


def _check_jsonschema(*files: Path) -> subprocess.CompletedProcess:
    tool = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run([str(tool), "--schemafile", str(JOBSET_SCHEMA), *map(str, files)],
                          capture_output=True, text=True)


def _misspell(text: str, old: str, new: str) -> str:
    """The first non-comment line with `old`, changed."""
    lines = text.splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if old in line and not line.lstrip().startswith("#"))
    lines[i] = lines[i].replace(old, new, 1)
    return "".join(lines)


def test_jobset_validates_against_the_vendored_crd_schema_and_a_misspelling_fails(tmp_path):
    proc = _check_jsonschema(JOBSET)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = JOBSET.read_text()
    broken = {"parallelism.yaml": ("parallelism: 2", "parallelsm: 2"),  # the Job template
              "fieldref.yaml": ("fieldRef:", "fieldRefs:"),  # the pod template's env
              "network.yaml": ("enableDNSHostnames:", "enableDnsHostnames:"),  # JobSet's own fields
              "metadata.yaml": ("  name: kerasenv-jax-jobset", "  nmae: kerasenv-jax-jobset"),  # ObjectMeta
              "version.yaml": ("apiVersion: jobset.x-k8s.io/v1alpha2", "apiVersion: jobset.x-k8s.io/v1")}
    for name, (old, new) in broken.items():
        (tmp_path / name).write_text(_misspell(text, old, new))
    proc = _check_jsonschema(*(tmp_path / name for name in broken))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = set(re.findall(r"([\w.-]+\.yaml)::", proc.stdout))
    assert failed == set(broken), proc.stdout


def test_the_vendored_schema_says_where_it_comes_from():
    schema = json.loads(JOBSET_SCHEMA.read_text())
    comment = schema["$comment"]
    assert "https://github.com/kubernetes-sigs/jobset/blob/v0.12.0/config/components/crd/bases/" \
           "jobset.x-k8s.io_jobsets.yaml" in comment
    assert re.search(r"commit [0-9a-f]{40}", comment)
    assert schema["properties"]["kind"] == {"const": "JobSet"}


def test_make_lint_validates_the_jobset_with_the_schema_and_the_rest_with_kubernetes_validate():
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", (REPO / "Makefile").read_text(), re.M)[1]
    assert "kubernetes-validate --strict --quiet $(filter-out %-jobset.yaml,$(wildcard k8s/*.yaml))" in recipe
    assert f"check-jsonschema --schemafile {JOBSET_SCHEMA.relative_to(REPO)} k8s/*-jobset.yaml" in recipe


# --- Kubeflow Trainer's jax-distributed runtime ------------------------------------------------


def test_kubeflows_jax_runtime_names_the_same_pod_as_jobset_would(tmp_path):
    """Its JobSet (named after the TrainJob, replicatedJob "node") puts process 0 at the DNS name
    its JAX_COORDINATOR_ADDRESS gives: the scheme the JobSet manifest here follows."""
    trainjob = "my-train"
    runtime = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": trainjob},
               "spec": {"replicatedJobs": [{"name": KUBEFLOW_NODE, "replicas": 1, "template": {"spec": {
                   "completions": 2, "parallelism": 2,
                   "template": {"spec": {"containers": [{"name": KUBEFLOW_NODE, "image": "x"}]}}}}}]}}
    path = tmp_path / "kubeflow-jobset.yaml"
    path.write_text(yaml.safe_dump(runtime))
    hosts = pod_hostnames(path)
    envs = kubeflow_jax_environments(trainjob, 2)
    assert [_split(e["JAX_COORDINATOR_ADDRESS"])[0] for e in envs] == [hosts[0]] * 2
    assert [e["JAX_PROCESS_ID"] for e in envs] == ["0", "1"] and {e["JAX_NUM_PROCESSES"] for e in envs} == {"2"}
