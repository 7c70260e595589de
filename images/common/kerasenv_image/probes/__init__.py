"""Probes run inside an image, each as `python -m kerasenv_image.probes.<name>`; each prints
one JSON line of what the image holds or can do, for the host to judge.

- gpu_libraries: the backend's own GPU-library check, by KERAS_BACKEND: TensorFlow's
  TryDlopenCUDALibraries() and the libraries TF and cuDNN open later; JAX's CUDA plugin's
  libraries (jax_libraries); what `import torch` maps and opens later (torch_libraries); ptxas
  for sm_100a/sm_120a (ptxas) for JAX and PyTorch. `--devices` / `--devices-only` list the GPUs
  (`kerasenv doctor --container`, smoke_tests/test_tf_gpu_libraries.py,
  smoke_tests/test_backend_gpu_libraries.py). The dlopen, /proc/self/maps and soname
  tables the three share are `loading` (no probe of its own).
- inventory: OS, Python, TensorFlow/Keras, installed distributions, user, environment
  (the acceptance suite's `inventory` fixture).
- cuda_audit: which cuDNN/cuBLAS the loader resolves for TensorFlow, every copy on disk,
  and ptxas (smoke_tests/test_cuda_libraries.py; run as root).
- kernel_targets: the SASS and PTX targets of the CUDA fat binaries in the framework's and
  the NVIDIA wheels' libraries, read from the ELF files (`kerasenv kernel-targets ID`,
  smoke_tests/test_kernel_targets.py).

Standard library at module level; TensorFlow, JAX or PyTorch only when a probe runs.
"""
