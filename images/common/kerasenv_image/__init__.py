"""kerasenv's in-image code: one copy, installed into every image at /opt/kerasenv.

- kerasenv_image.smoke: the smoke training (the images' default command), one module a job.
- kerasenv_image.GpuMonitor (gpu_monitor): a Keras callback writing GPU utilisation and
  memory per epoch as TensorBoard scalars, for the smoke training and for your own fit().
- kerasenv_image.gpu_sampler: the nvidia-smi sampler and its steady-state window (also
  `kerasenv bench`'s, on the host); kerasenv_image.gpu_verdict: what the numbers mean.
- kerasenv_image.backends: what differs per Keras backend (KERAS_BACKEND: tensorflow, jax,
  torch), behind one seam; kerasenv_image.tb_writer: TensorBoard scalars without TensorFlow.
- kerasenv_image.profiling: which steps to profile (Keras' TensorBoard profile_batch=),
  their wall time, and the input pipeline's wait read from the profile (the smoke's --profile).

images/ is the single build context of every image (`docker build -f images/<id>/Dockerfile
images`), so no variant folder carries a copy of this code.

Importing the package imports nothing heavy: `GpuMonitor` is resolved on first use (then
the backend's Keras is imported: TensorFlow's on the TensorFlow images).
"""

__all__ = ["GpuMonitor"]


def __getattr__(name: str):
    if name == "GpuMonitor":
        from .gpu_monitor import monitor_class

        return monitor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
