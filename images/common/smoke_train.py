"""/opt/kerasenv/smoke_train.py, the images' default command: the smoke training,
kerasenv_image.smoke (`python -m kerasenv_image.smoke` is the same run); this path stays
for compose, Kubernetes and the docs. Run as a script, its own folder is on sys.path."""

from kerasenv_image.smoke.main import exit_now, main

if __name__ == "__main__":
    exit_now(main())
