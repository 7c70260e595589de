"""CUDA images: what XLA and the driver need on a GPU, checked without one.

XLA compiles its kernels with ptxas and links libdevice; the driver JIT-compiles PTX for
GPUs without native kernels and caches the result. None of that needs a GPU to inspect.
"""

from __future__ import annotations

import re
import shlex

import pytest

FAMILIES = {"cuda"}
NVIDIA = "/opt/venv/lib/python{python}/site-packages/nvidia"
CACHE = "/var/cache/kerasenv/cuda"

# The smallest kernel there is. PTX ISA 7.8 is what CUDA 11.8's ptxas reads (and every
# later one), and it knows every target up to sm_90.
KERNEL_PTX = """.version 7.8
.target {arch}
.address_size 64
.visible .entry kerasenv_probe(.param .u64 out)
{{
    .reg .u64 %rd<2>;
    .reg .u32 %r<2>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, 42;
    st.global.u32 [%rd1], %r1;
    ret;
}}
"""


def uses_xla(target) -> None:
    if target.variant.backend == "torch":
        pytest.skip("PyTorch does not compile with XLA and its image has no nvcc wheel (no XLA_FLAGS, no "
                    "libdevice): Triton's own ptxas is checked in smoke_tests/test_backend_gpu_libraries.py")


def label_lists_tensorflows_kernels(target) -> None:
    if target.variant.backend != "tensorflow":
        pytest.skip("the kernel here is PTX ISA 7.8, which reaches up to sm_90, and this "
                    f"{target.variant.backend} image's label lists Blackwell targets (ISA >= 8.6): its ptxas is "
                    "checked for its lowest target and sm_100a/sm_120a in smoke_tests/test_backend_gpu_libraries.py")


def image_env(image) -> dict[str, str]:
    return dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])


def sass_targets(image) -> list[str]:
    """The sm_XX the image's label says TensorFlow ships native kernels for."""
    claimed = image.labels["io.kerasenv.cuda-compute-capabilities"].split(",")
    return [cc for cc in claimed if cc.startswith("sm_")]


def test_xla_flags_point_at_the_pinned_nvcc_wheel_and_libdevice_is_there(image, box, target):
    uses_xla(target)
    nvcc = NVIDIA.format(python=target.variant.python) + "/cuda_nvcc"
    assert image_env(image)["XLA_FLAGS"] == f"--xla_gpu_cuda_data_dir={nvcc}"
    code, out = box.exec(["bash", "-c", 'd=${XLA_FLAGS#--xla_gpu_cuda_data_dir=}; '
                                        'test -s "$d/nvvm/libdevice/libdevice.10.bc" && '
                                        'head -c 4 "$d/nvvm/libdevice/libdevice.10.bc" | od -An -tx1'])
    assert code == 0, out
    assert out.split() == ["42", "43", "c0", "de"], "libdevice.10.bc is not LLVM bitcode"  # 'BC' 0xC0DE


def test_the_label_claims_native_kernels_at_all(image, target):
    label_lists_tensorflows_kernels(target)
    assert sass_targets(image), image.labels["io.kerasenv.cuda-compute-capabilities"]


def test_ptxas_compiles_a_kernel_for_every_sass_target_the_label_claims(image, box, target):
    label_lists_tensorflows_kernels(target)
    script = []
    for arch in sass_targets(image):
        ptx = KERNEL_PTX.format(arch=arch)
        script.append(f"printf %s {shlex.quote(ptx)} > /tmp/k_{arch}.ptx && "
                      f"ptxas -arch={arch} /tmp/k_{arch}.ptx -o /tmp/k_{arch}.cubin && "
                      f"test -s /tmp/k_{arch}.cubin && echo compiled {arch}")
    code, out = box.exec(["bash", "-c", " && ".join(script) + "; status=$?; rm -f /tmp/k_*; exit $status"])
    assert code == 0, out[-3000:]
    compiled = re.findall(r"^compiled (sm_\d+)$", out, re.M)
    assert compiled == sass_targets(image)


def test_ptxas_compiles_for_the_ptx_target_the_label_claims(image, box, target):
    """compute_XX in the label (compute_90 on TF >= 2.16, compute_80 before) is PTX the
    driver JIT-compiles on newer GPUs (H100/H200 for compute_90); XLA compiles its own
    kernels for those GPUs with this ptxas, so it must accept sm_XX too."""
    label_lists_tensorflows_kernels(target)
    ptx_targets = [cc.replace("compute_", "sm_") for cc in
                   image.labels["io.kerasenv.cuda-compute-capabilities"].split(",") if cc.startswith("compute_")]
    assert ptx_targets, "no PTX target in the label"
    for arch in ptx_targets:
        ptx = KERNEL_PTX.format(arch=arch)
        code, out = box.exec(["bash", "-c", f"printf %s {shlex.quote(ptx)} > /tmp/k.ptx && ptxas -arch={arch} "
                                            "/tmp/k.ptx -o /tmp/k.cubin && test -s /tmp/k.cubin; s=$?; "
                                            "rm -f /tmp/k.*; exit $s"])
        assert code == 0, (arch, out)


def test_cuda_device_order_is_pci_bus_id(image):
    assert image_env(image)["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"


def test_the_jit_cache_is_a_directory_any_user_can_write_and_large_enough(image, root_host):
    env = image_env(image)
    assert env["CUDA_CACHE_PATH"] == CACHE
    assert int(env["CUDA_CACHE_MAXSIZE"]) == 4 * 2**30  # CUDA's maximum
    cache = root_host.file(CACHE)
    assert cache.is_directory and cache.mode == 0o1777
