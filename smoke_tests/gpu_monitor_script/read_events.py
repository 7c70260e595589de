"""Reads GpuMonitor's event files back with TensorBoard's own EventAccumulator:
`python read_events.py LOG_DIR/gpu`; prints {tag: [[step, value], ...]} as one JSON line."""

import json
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.util.tensor_util import make_ndarray  # TensorBoard's own: no TensorFlow on JAX/PyTorch

acc = EventAccumulator(sys.argv[1], size_guidance={"tensors": 0, "scalars": 0})
acc.Reload()
out = {}
for tag in acc.Tags()["tensors"]:  # tf.summary.scalar in TF 2 writes tensor events
    out[tag] = [[e.step, float(make_ndarray(e.tensor_proto))] for e in acc.Tensors(tag)]
for tag in acc.Tags()["scalars"]:
    out[tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
print(json.dumps(out))
