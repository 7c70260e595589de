#!/bin/bash
# Usage: write-pip-constraints.sh OUT_DIR FRAMEWORK==VERSION LOCK...
# Every pin of the locks becomes a pip constraint (/etc/kerasenv/constraints.txt, read through
# /etc/pip.conf by every pip in the image): an install on top that would replace TensorFlow,
# Keras, numpy or a CUDA wheel is refused by pip's resolver instead of silently breaking the
# tested stack. The CUDA wheels stay root-owned besides: nothing can rewrite them in place.
# Writes OUT_DIR/constraints.txt and OUT_DIR/pip.conf in the builder stage; the runtime
# copies both to where pip reads them.
set -euo pipefail
out=$1 framework=$2
shift 2

mkdir "$out"
sed -n 's/^\([A-Za-z0-9][A-Za-z0-9._-]*==[^ \\;]*\).*/\1/p' "$@" | sort -f > "$out"/constraints.txt
# The locks pin the framework of the matrix (tensorflow-cpu, jax, torch ...) exactly.
grep -Fx "$framework" "$out"/constraints.txt >/dev/null
printf '%s\n' '# kerasenv: every pip install in this image keeps the versions it was built and tested with.' \
  '# Install on top: pip install <package>. To replace a pinned package on purpose, build' \
  '# another variant, or bypass this file: PIP_CONFIG_FILE=/dev/null pip install ...' \
  '[install]' 'constraint = /etc/kerasenv/constraints.txt' \
  '[global]' 'no-cache-dir = true' 'disable-pip-version-check = true' > "$out"/pip.conf
