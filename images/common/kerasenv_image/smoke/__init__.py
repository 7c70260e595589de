"""The smoke training: prove that Keras trains on this container's GPU (or CPU).

Run as `python /opt/kerasenv/smoke_train.py` (the images' default command) or
`python -m kerasenv_image.smoke`. Runs on Keras 3 (TF >= 2.16) and on tf.keras 2
(TF 2.14/2.15), with no network and no downloads: the data is synthetic (seeded) but
learnable.

Modules: args (the command line), environment (shm, nvidia-smi, devices, placement),
data, model, compile_options (mixed precision, XLA), training (fit, one host),
multiworker (TF_CONFIG), verdict, report (report.json, the summary), errors (exit codes,
TensorFlow error classes), tf_log (TF's log lines kept for the report), log_filter (TF's
known start-up noise, hidden from the terminal unless --verbose), main (the run).

Exit codes:
  0  ok: the model learned, on the device the placement check asked for
  1  unexpected: a bug of the smoke training itself (report.json says so)
  2  bad usage (arguments, unwritable output directory)
  3  a GPU was required (--require-gpu) but none is visible, or TensorFlow is not
     built for the device family of this image
  4  training failed: NaN/inf loss, the model did not learn, or the placement check's
     result was not on the requested device
  5  out of memory (GPU ResourceExhausted or host MemoryError)
  6  the results could not be written (disk full or I/O error in the output directory);
     no partial report.json is left behind
  7  TensorFlow failed on the GPU stack: error.kind cudnn-autotune, ptx-jit,
     no-kernel-image, xla-toolchain, nccl or cuda-driver, each with its fix
  8  any other TensorFlow runtime error (error.kind tensorflow-runtime)
  130/143  interrupted (SIGINT/SIGTERM)
"""
