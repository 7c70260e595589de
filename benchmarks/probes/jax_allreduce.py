"""What one gloo all-reduce of the smoke model's gradients costs, across the processes of a
keras.distribution job: run by scripts/bench_multiworker.py as a user's own script
(`kerasenv multiworker jax0.12-cpu --workers N --cpu-devices 1 --project DIR -- python jax_allreduce.py`).

Each process holds one gradient-sized float32 vector (the smoke model's parameter count, read
from the model itself); summing it over the processes' devices into a replicated result is the
all-reduce DataParallel does once per training step. Process 0 prints one JSON line.
"""

import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402

keras.distribution.initialize()  # from KERAS_DISTRIBUTION_*, as `kerasenv multiworker` sets them

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

# The image's own smoke model, so the size is the real one: kerasenv_image is installed in the
# image's venv (its kerasenv-image.pth), as for every other in-image user; no sys.path edit.
from kerasenv_image.smoke.model import build_model  # noqa: E402

ROUNDS = int(os.environ.get("ALLREDUCE_ROUNDS", "200"))
params = sum(int(np.prod(w.shape)) for w in build_model(keras).weights)
devices = jax.devices()
mesh = jax.sharding.Mesh(np.array(devices), ("d",))
rows = NamedSharding(mesh, PartitionSpec("d"))
replicated = NamedSharding(mesh, PartitionSpec())
local = [jax.device_put(np.full((1, params), jax.process_index() + 1, np.float32), d)
         for d in jax.local_devices()]
grads = jax.make_array_from_single_device_arrays((len(devices), params), rows, local)
allreduce = jax.jit(lambda g: g.sum(axis=0), out_shardings=replicated)

out = allreduce(grads).block_until_ready()  # compile, and the first exchange
expected = sum(range(1, jax.process_count() + 1)) * (len(devices) // jax.process_count())
assert float(np.asarray(out.addressable_data(0))[0]) == expected, "the all-reduce summed wrongly"
started = time.perf_counter()
for _ in range(ROUNDS):
    out = allreduce(grads)
out.block_until_ready()
seconds = (time.perf_counter() - started) / ROUNDS
if jax.process_index() == 0:
    print(json.dumps({"processes": jax.process_count(), "devices": len(devices), "params": params,
                      "bytes": params * 4, "rounds": ROUNDS, "allreduce_ms": round(seconds * 1000, 3)}),
          flush=True)
