#!/bin/bash
# Usage: write-pip-constraints.sh OUT_DIR FRAMEWORK==VERSION LOCK...
# Every pin of the locks becomes a pip constraint (/etc/kerasenv/constraints.txt, read through
# /etc/pip.conf by every pip in the image): an install on top that would replace TensorFlow,
# Keras, numpy or a CUDA wheel is refused by pip's resolver instead of silently breaking the
# tested stack. The CUDA wheels stay root-owned besides: nothing can rewrite them in place.
# Writes OUT_DIR/etc/kerasenv/constraints.txt and OUT_DIR/etc/pip.conf in the builder stage, a
# tree from / dated SOURCE_DATE_EPOCH (issue 52: the same bytes from the same locks), which the
# runtime copies to /.
set -euo pipefail
out=$1 framework=$2
shift 2

mkdir -p "$out"/etc/kerasenv
chmod 755 "$out" "$out"/etc "$out"/etc/kerasenv
sed -n 's/^\([A-Za-z0-9][A-Za-z0-9._-]*==[^ \\;]*\).*/\1/p' "$@" | LC_ALL=C sort -f > "$out"/etc/kerasenv/constraints.txt
# The locks pin the framework of the matrix (tensorflow-cpu, jax, torch ...) exactly.
grep -Fx "$framework" "$out"/etc/kerasenv/constraints.txt >/dev/null
printf '%s\n' '# kerasenv: every pip install in this image keeps the versions it was built and tested with.' \
  '# Install on top: pip install <package>. To replace a pinned package on purpose, build' \
  '# another variant, or bypass this file: PIP_CONFIG_FILE=/dev/null pip install ...' \
  '[install]' 'constraint = /etc/kerasenv/constraints.txt' \
  '[global]' 'no-cache-dir = true' 'disable-pip-version-check = true' > "$out"/etc/pip.conf
chmod 644 "$out"/etc/kerasenv/constraints.txt "$out"/etc/pip.conf
find "$out" -exec touch -h -d "@${SOURCE_DATE_EPOCH:-0}" {} +
