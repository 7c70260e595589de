"""HPC launchers (issue 44): Apptainer's SIF from a local image (`kerasenv sif`). Slurm's side is
slurm/kerasenv-jax-apptainer.sbatch; docs/using/hpc-apptainer.md is the user's page."""
