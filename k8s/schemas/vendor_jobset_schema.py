"""Writes k8s/schemas/jobset.x-k8s.io_jobset_v1alpha2.json: the JobSet CRD's OpenAPI v3 schema as
a strict JSON schema, for `make lint` (check-jsonschema). kubernetes-validate knows built-in kinds
only: given a JobSet it warns "Couldn't find schema" and passes it unchecked.

    git -C <jobset checkout> show <tag>:config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml > crd.yaml
    .venv/bin/python k8s/schemas/vendor_jobset_schema.py crd.yaml <tag> <commit> > k8s/schemas/jobset.x-k8s.io_jobset_v1alpha2.json

What it changes, so that a misspelled field fails here as `kubectl apply` (server-side strict field
validation) fails it on a cluster:
- every object schema with `properties` gets `additionalProperties: false` (the API server
  rejects unknown fields of a structural schema under fieldValidation=Strict, kubectl's default);
- the top-level `metadata` (the CRD says only `type: object`) becomes Kubernetes' ObjectMeta, taken
  from kubernetes-validate's strict schema of the Kubernetes version it bundles;
- apiVersion and kind are required and fixed;
- `description` texts are dropped (the CRD keeps them) to keep the file small.
Not checked offline: the CRD's CEL rules (x-kubernetes-validations, kept as inert keywords) and the
JobSet webhook's validation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

SOURCE = "https://github.com/kubernetes-sigs/jobset/blob/{tag}/config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def strict(node):
    """A copy without descriptions, every object with properties closed."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if k != "description"}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def object_meta() -> tuple[dict, dict, str]:
    """ObjectMeta and the definitions it refers to, from kubernetes-validate's strict schemas."""
    import kubernetes_validate

    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    version = max((p.name for p in root.glob("v*-local-strict")),
                  key=lambda n: tuple(int(x) for x in n[1:].split("-")[0].split(".")))
    defs = json.loads((root / version / "_definitions.json").read_text())["$defs"]
    prefix = "#/$defs/"  # the form of every $ref in _definitions.json, and in the file written
    wanted, todo = {}, [META]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted[name] = defs[name]
        text = json.dumps(defs[name])
        todo += [part.split('"', 1)[0] for part in text.split(prefix)[1:]]
    return strict(wanted[META]), {k: strict(v) for k, v in sorted(wanted.items()) if k != META}, version


def main(crd_path: str, tag: str, commit: str) -> None:
    crd = yaml.safe_load(Path(crd_path).read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
    schema = strict(version["schema"]["openAPIV3Schema"])
    meta, defs, k8s = object_meta()
    schema["properties"]["metadata"] = meta
    schema["properties"]["apiVersion"] = {"const": f"{group}/{version['name']}"}
    schema["properties"]["kind"] = {"const": kind}
    schema["required"] = sorted({"apiVersion", "kind", *schema.get("required", [])})
    out = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"{kind} {group}/{version['name']} (kubernetes-sigs/jobset {tag}), strict",
        "$comment": (f"Vendored from {SOURCE.format(tag=tag)} (tag {tag}, commit {commit}; "
                     f"controller-gen {crd['metadata'].get('annotations', {}).get('controller-gen.kubebuilder.io/version', '?')}): "
                     f"spec.versions[name={version['name']}].schema.openAPIV3Schema, made strict by "
                     f"k8s/schemas/vendor_jobset_schema.py (see its docstring); metadata is ObjectMeta from "
                     f"kubernetes-validate's {k8s} schema. Regenerate with that script; do not edit by hand."),
        **schema,
        "$defs": defs,
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
