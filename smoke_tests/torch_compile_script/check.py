"""torch.compile in a kerasenv PyTorch image: Inductor's generated code against eager mode, and
Keras's jit_compile=True (its torch trainer compiles the train step with torch.compile) against
jit_compile=False. One JSON line on stdout. DEVICE=cpu (Inductor writes C++ and compiles it with
the image's g++) or cuda (Inductor writes Triton kernels; Triton builds its launcher with gcc)."""

from __future__ import annotations

import json
import os
import pathlib
import time

import numpy as np
import torch

device = os.environ.get("DEVICE", "cpu")
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to(device)
x = torch.randn(128, 32, device=device)
with torch.no_grad():
    eager = module(x)
    started = time.monotonic()
    compiled = torch.compile(module)(x)
    if device == "cuda":
        torch.cuda.synchronize()
first_call_s = time.monotonic() - started

cache = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
generated = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.suffix in (".cpp", ".so", ".py"))

import keras  # noqa: E402  (after torch's own check: KERAS_BACKEND=torch in the image)


def fit(jit: bool) -> tuple[list[float], list[np.ndarray]]:
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
    rng = np.random.RandomState(0)
    xs = rng.randn(256, 32).astype("float32")
    ys = (xs[:, 0] > 0).astype("int64")
    history = model.fit(xs, ys, epochs=3, batch_size=64, shuffle=False, verbose=0)
    assert model.jit_compile is jit, model.jit_compile
    return history.history["loss"], [np.asarray(w) for w in model.get_weights()]


loss_jit, weights_jit = fit(True)
loss_eager, weights_eager = fit(False)
print(json.dumps({
    "device": device,
    "torch": torch.__version__,
    "uid": os.getuid(),
    "max_abs_diff": float((compiled - eager).abs().max()),
    "first_call_s": round(first_call_s, 1),
    "generated": generated,
    "keras_loss_jit": loss_jit,
    "keras_loss_eager": loss_eager,
    "keras_weights_max_abs_diff": max(float(np.abs(a - b).max()) for a, b in zip(weights_jit, weights_eager)),
}))
