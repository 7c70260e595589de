"""The smoke training's GPU-monitor path without a GPU: `python smoke_monitored.py ARGS`
runs the real smoke (kerasenv_image.smoke.main) but tells its training step that it
trains on one GPU, `/physical_device:GPU:0`, so the GpuMonitor is added and samples the
nvidia-smi it is given (the recorded loop, replayed); TensorFlow still trains on the CPU.
Only the monitor's side is simulated: the report and the summary are the real code's.

The monitor's class is given a floor of STEP_FLOOR_S per step: on a fast CPU the smoke's
32 steps took under 0.3 s an epoch, too short for a single 200 ms sample after the
settling time (the verdict then says "epochs too short", which the unit tests cover),
so without the floor what this test checks would depend on the CPU."""

import sys
import time
from types import SimpleNamespace

from kerasenv_image import gpu_monitor  # no path set-up: the image's .pth file has it
from kerasenv_image.smoke import main, training

STEP_FLOOR_S = 0.04  # 32 steps: at least 1.3 s an epoch, 4 or more samples after settling
_monitor_class = gpu_monitor.monitor_class


def paced_monitor_class(keras):
    class PacedGpuMonitor(_monitor_class(keras)):
        def on_train_batch_begin(self, batch, logs=None):
            self._step_began = time.perf_counter()
            super().on_train_batch_begin(batch, logs)

        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            time.sleep(max(0.0, STEP_FLOOR_S - (time.perf_counter() - self._step_began)))

    return PacedGpuMonitor


gpu_monitor.monitor_class = paced_monitor_class


# GPU 0 as each backend's device list shows it: TensorFlow's PhysicalDevice has a name, JAX's
# Device an id, a platform and a kind; the PyTorch backend lists CUDA ordinals (ints).
FAKE_GPU_0 = SimpleNamespace(name="/physical_device:GPU:0", id=0, index=0, platform="gpu", device_kind="GPU 0")


def train_as_if_on_gpu_0(backend, fw, keras, args, report, gpus):
    # The backend seam (kerasenv_image.backends) and its framework module pass through untouched:
    # only the GPU list is made up, on TensorFlow, JAX and PyTorch alike.
    gpu_0 = 0 if backend.NAME == "torch" else FAKE_GPU_0
    return training.train(backend, fw, keras, args, report, [gpu_0])


main.train = train_as_if_on_gpu_0
main.exit_now(main.main(sys.argv[1:]))
