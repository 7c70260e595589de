"""The smoke training: prove that Keras trains on this container's GPU (or CPU).

Run as `python /opt/kerasenv/smoke_train.py` (the images' default command) or
`python -m kerasenv_image.smoke`. Runs on Keras 3 (TF >= 2.16) and on tf.keras 2
(TF 2.14/2.15), and on Keras 3 over JAX or PyTorch (KERAS_BACKEND; the framework's own
parts are kerasenv_image.backends), with no network and no downloads: the data is
synthetic (seeded) but learnable.

Modules: args (the command line), environment (shm, nvidia-smi, why no GPU), data, model,
compile_options (mixed precision), training (fit, one host),
multiworker (TF_CONFIG), verdict, report (report.json, the summary), errors (exit codes,
TensorFlow error classes), tf_log (TF's log lines kept for the report), log_filter (TF's
known start-up noise, hidden from the terminal unless --verbose), main (the run).

Exit codes:
  0  ok: the model learned, on the device the placement check asked for
  1  unexpected: a bug of the smoke training itself (report.json says so)
  2  bad usage (arguments, unwritable output directory, an option this backend does not
     have: --logical-cpus or TF_CONFIG on PyTorch, TF_CONFIG on JAX)
  3  a GPU was required (--require-gpu) but none is visible, or the framework is not
     built for the device family of this image
  4  training failed: NaN/inf loss, the model did not learn, or the placement check's
     result was not on the requested device
  5  out of memory (GPU ResourceExhausted or host MemoryError)
  6  the results could not be written (disk full or I/O error in the output directory);
     no partial report.json is left behind
  7  the framework failed on the GPU stack: error.kind cudnn-autotune, ptx-jit,
     no-kernel-image, xla-toolchain, nccl or cuda-driver, each with its fix
  8  any other runtime error of the framework (error.kind tensorflow-runtime,
     jax-runtime or torch-runtime)
  9  several processes (Keras on JAX: backends.jax_processes) could not form the job: the
     coordinator did not answer in time, or JAX could not join them
  130/143  interrupted (SIGINT/SIGTERM)
"""
