#!/bin/bash
# Usage: install-locked-venv.sh VENV PYTHON_VERSION LOCK
# The builder stage's venv: TensorFlow, Keras and their dependencies from the variant's
# hash-checked lock, made extensible by the image user. Runs in the builder stage only;
# the runtime copies the finished venv.
set -euo pipefail
venv=$1 python=$2 lock=$3
site_packages=$venv/lib/python$python/site-packages
test -d "$site_packages"

pip install --no-deps --require-hashes --only-binary=:all: -r "$lock"
pip check

# tensorflow/include (C++ headers, ~290 MB) only serves compiling custom ops, which
# needs a compiler toolchain this image does not carry; it is left out.
rm -rf "$site_packages"/tensorflow/include

# The venv is made writable for group 0 here, in the layer that creates its files (a chmod
# in the runtime stage would store the whole venv a second time), and the runtime copies it
# owned by 1000:0. So `pip install` works as the image user (uid 1000) and as any
# `--user UID:0` or `--group-add 0` (OpenShift's arbitrary-UID convention; kerasenv run adds
# group 0). Directories are setgid so what a user installs stays group 0 as well.
chmod -R g+w "$venv"
find "$venv" -type d -exec chmod g+s {} +
