"""The Kubernetes example validates offline and its TF_CONFIG matches the Job's size."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from ..conftest import REPO

MANIFEST = REPO / "k8s" / "multiworker-job.yaml"


def test_manifest_validates_strictly_against_the_kubernetes_schema():
    validator = Path(sys.executable).parent / "kubernetes-validate"
    proc = subprocess.run([str(validator), "--strict", str(MANIFEST)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_tf_config_lists_one_worker_per_completion_and_gpus_are_limited():
    service, job = list(yaml.safe_load_all(MANIFEST.read_text()))
    spec = job["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    workers = re.findall(r"kerasenv-multiworker-(\d+)\.kerasenv-multiworker:12345", container["args"][0])
    assert [int(w) for w in workers] == list(range(spec["completions"]))
    assert spec["parallelism"] == spec["completions"] and spec["completionMode"] == "Indexed"
    assert pod["subdomain"] == service["metadata"]["name"] and service["spec"]["clusterIP"] == "None"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "${JOB_COMPLETION_INDEX}" in container["args"][0]
