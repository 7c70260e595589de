"""This host: its GPUs and driver (nvidia-smi), the doctor's verdicts, and the variant it calls for."""
