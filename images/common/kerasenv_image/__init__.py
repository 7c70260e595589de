"""kerasenv's in-image code: one copy, installed into every image at /opt/kerasenv.

- kerasenv_image.smoke: the smoke training (the images' default command), one module a job.

images/ is the single build context of every image (`docker build -f images/<id>/Dockerfile
images`), so no variant folder carries a copy of this code.
"""
