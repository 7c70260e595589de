"""Running containers: one run (runner), its mounts, JupyterLab, multi-worker training."""
