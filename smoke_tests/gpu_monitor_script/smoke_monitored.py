"""The smoke training's GPU-monitor path without a GPU: `python smoke_monitored.py ARGS`
runs the real smoke (kerasenv_image.smoke.main) but tells its training step that it
trains on one GPU, `/physical_device:GPU:0`, so the GpuMonitor is added and samples the
nvidia-smi it is given (the recorded loop, replayed); TensorFlow still trains on the CPU.
Only the monitor's side is simulated: the report and the summary are the real code's."""

import sys
from types import SimpleNamespace

sys.path.insert(0, "/opt/kerasenv")

from kerasenv_image.smoke import main, training  # noqa: E402


def train_as_if_on_gpu_0(tf, keras, args, report, gpus):
    return training.train(tf, keras, args, report, [SimpleNamespace(name="/physical_device:GPU:0")])


main.train = train_as_if_on_gpu_0
main.exit_now(main.main(sys.argv[1:]))
