"""The labels every image carries: the OCI set plus io.kerasenv.* facts.

Tests compare these with what the running image reports, so a tag cannot lie.
"""

from __future__ import annotations

from .schema import Matrix, Variant

NS = "io.kerasenv"
OCI = "org.opencontainers.image"


def static_labels(matrix: Matrix, v: Variant, arch: str = "amd64") -> dict[str, str]:
    """Labels fixed by the matrix (written into the Dockerfile); `arch`: which image of the tag
    (the arm64 one carries its own kernels and its own GPU evidence)."""
    source = matrix.project["source"]
    labels = {
        f"{OCI}.title": f"kerasenv {v.id}",
        f"{OCI}.description": describe(v),
        f"{OCI}.version": v.id,
        f"{OCI}.source": source,
        f"{OCI}.url": source,
        f"{OCI}.documentation": f"{source}/blob/main/README.md",
        f"{OCI}.licenses": matrix.project["license"],
        f"{OCI}.vendor": matrix.project["name"],
        f"{NS}.variant": v.id,
        f"{NS}.family": v.family,
        f"{NS}.backend": v.backend,
        f"{NS}.{v.backend}": v.framework_version,
        f"{NS}.keras": v.keras,
        f"{NS}.python": v.python,
    }
    if v.family == "cuda":
        windows = v.driver_floors("windows")
        labels.update({
            f"{NS}.cuda": v.cuda or "",
            f"{NS}.cudnn": v.cudnn or "",
            f"{NS}.nccl": v.nccl or "",
            f"{NS}.min-driver": v.min_driver or "",
            f"{NS}.min-driver-ptx-jit": v.min_driver_ptx or "",
            f"{NS}.cuda-wheels-driver": v.min_driver_toolkit or "",
            # The same floors for the Windows driver a WSL2 host runs (NVIDIA's Windows column).
            f"{NS}.min-driver-windows": windows.load if windows else "",
            f"{NS}.min-driver-ptx-jit-windows": windows.ptx_jit if windows else "",
            # What TensorFlow itself was built with (tf.sysconfig.get_build_info()): the
            # image's wheels (io.kerasenv.cuda) differ from it under a GPU-verified override.
            f"{NS}.{v.backend}-built-with-cuda": v.built_with_stack.cuda if v.built_with_stack else "",
            f"{NS}.cuda-compute-capabilities": ",".join(_compute_capabilities(v, arch)),
        })
        kernels = v.kernels_for(arch)
        if kernels is not None:
            # What the framework's binaries carry (images/<id>/kernel-targets.json), read from
            # them: TF's published list (cuda-compute-capabilities) can miss some (TF 2.21's sm_90).
            labels[f"{NS}.kernels.sass"] = ",".join(kernels.sass)
            labels[f"{NS}.kernels.ptx"] = ",".join(kernels.ptx)
        evidence = v.provenance
        if arch == "arm64" and v.arm64:
            # Who ran this stack on an arm64 GPU, and what that leaves uncovered (no evidence: empty
            # cuda-stack.* labels and the gap says so).
            evidence = v.arm64.gpu_evidence
            labels[f"{NS}.cuda-stack.evidence-gap"] = v.arm64.evidence_gap
        if evidence is None:
            return labels
        labels.update({
            f"{NS}.cuda-stack.provenance": evidence.kind,
            f"{NS}.cuda-stack.source": evidence.source,
            f"{NS}.cuda-stack.gpu": evidence.gpu,
            f"{NS}.cuda-stack.date": evidence.date,
            f"{NS}.cuda-stack.ran": evidence.ran,
        })
    if v.family == "rocm":
        labels[f"{NS}.rocm"] = v.rocm or ""
    return labels


def _compute_capabilities(v: Variant, arch: str) -> tuple[str, ...]:
    """TF's published list, else (JAX, PyTorch) what that architecture's binaries carry."""
    if arch == "amd64" or v.tf_release is not None:
        return v.compute_capabilities
    kernels = v.kernels_for(arch)
    return kernels.all if kernels else ()


# Labels whose values come from build arguments (see the templates' ARG lines).
DYNAMIC_LABELS = {
    f"{OCI}.base.name": "${BASE_IMAGE}",
    f"{OCI}.revision": "${KERASENV_REVISION}",
    f"{OCI}.created": "${KERASENV_CREATED}",
}
# The Debian-based variants' too: the archive state whose updates the base stage applied
# (security/debian.py; AMD's image is AMD's to update).
DEBIAN_DYNAMIC_LABELS = {f"{NS}.debian-updates": "${DEBIAN_UPDATES}"}


def dynamic_labels(v: Variant) -> dict[str, str]:
    return {**DYNAMIC_LABELS, **(DEBIAN_DYNAMIC_LABELS if v.family != "rocm" else {})}


def describe(v: Variant) -> str:
    keras = f"Keras {v.keras}" + (" (tf.keras)" if v.keras_is_tf_keras else "")
    text = f"{v.framework_name} {v.framework_version}, {keras}, Python {v.python}"
    if v.family == "cuda":
        text += f", CUDA {v.cuda}, cuDNN {v.cudnn}"
        if v.backend != "tensorflow":
            text += f", Keras backend {v.backend}"
    elif v.family == "rocm":
        text += f", ROCm {v.rocm}"
    else:
        text += ", CPU only"
    return text
