"""The Docker engine: connecting to it, and what it can give a container (GPUs)."""
