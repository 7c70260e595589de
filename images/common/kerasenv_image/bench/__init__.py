"""kerasenv bench: training throughput of two small Keras models on this container's device.

`kerasenv bench` runs `python -m kerasenv_image.bench ...` in the image (the package is
installed in every image at /opt/kerasenv), one container per device: the CPU (no GPU
given to the container) and each GPU on its own (`--gpus device=N`). Runs on Keras 3 and
tf.keras 2.

For every configuration (model x batch size x XLA jit x precision) it measures, with
synthetic data already in memory (one batch, repeated: no input pipeline in the figure):

- time to first step: model build + compile + the first training step (tracing, XLA
  compilation, cuDNN autotuning);
- steady-state samples/s: after `--warmup-steps` more steps, at least `--min-steps`
  timed steps and then until `--time-box` seconds have passed (or `--max-steps`);
- the wall-clock window (epoch seconds) of those timed steps, so the host can attribute
  GPU utilisation samples to the steady state only.

A configuration that fails (out of memory at a large batch, a precision the device
cannot run) is recorded with its reason; the others still run.

Output: progress lines on stderr; the results as ONE JSON line on stdout, prefixed with
`KERASENV_BENCH_RESULT ` (TensorFlow never writes that). Exit codes: 0 every
configuration ran (failed ones included), 2 bad usage, 3 `--device gpu` but TensorFlow
sees no GPU, 130/143 interrupted.

Modules: protocol (what the host and the container agree on: choices, the result line,
exit codes), args (the command line), capabilities (which precisions and XLA the device
can run), measure (the models and the timed training), main (the run). Only `measure`
and `main` import TensorFlow, and only when the bench runs.
"""
