#!/bin/bash
# Usage: install-locked-venv.sh VENV PYTHON_VERSION LOCK
# The builder stage's venv: TensorFlow, Keras and their dependencies from the variant's
# hash-checked lock, made extensible by the image user. Runs in the builder stage only;
# the runtime copies the finished venv.
set -euo pipefail
venv=$1 python=$2 lock=$3
site_packages=$venv/lib/python$python/site-packages
test -d "$site_packages"

if [ -n "${PIP_PLATFORM:-}" ]; then
  # Another platform's wheels (the arm64 image built on amd64: PIP_PLATFORM and its companions
  # come from the Dockerfile). pip takes --platform only with --target; the scripts it writes
  # there (shebang: this venv's python) go to the venv's bin. No `pip check` here: it would judge
  # the requirements' markers for this machine; the runtime stage runs it on the image's own
  # interpreter (cuda-loader-config.sh, or below for CPU images).
  pip install --no-deps --require-hashes --target "$site_packages" -r "$lock"
  if [ -d "$site_packages"/bin ]; then
    mv "$site_packages"/bin/* "$venv"/bin/
    rmdir "$site_packages"/bin
  fi
  problems=""
else
  pip install --no-deps --require-hashes --only-binary=:all: -r "$lock"
  problems=$(pip check 2>&1 || true)
fi
# The CUDA wheels (requirements-cuda.lock beside the lock) are installed in a stage of their
# own and join this venv only in the runtime stage, which runs the full `pip check`
# (cuda-loader-config.sh). Here a missing one of them is expected (PyTorch requires its
# nvidia-* wheels outright); anything else pip reports fails the build.
cuda_lock=$(dirname "$lock")/requirements-cuda.lock
if [ -f "$cuda_lock" ]; then
  while read -r name; do
    problems=$(printf '%s\n' "$problems" | grep -v -i "requires $name, which is not installed" || true)
  done < <(sed -n 's/^\([A-Za-z0-9][A-Za-z0-9._-]*\)==.*/\1/p' "$cuda_lock")
fi
problems=$(printf '%s\n' "$problems" | grep -v '^No broken requirements found' | sed '/^$/d' || true)
if [ -n "$problems" ]; then
  printf 'pip check:\n%s\n' "$problems" >&2
  exit 1
fi

# NVIDIA wheels a backend needs beyond the shared CUDA stack (JAX: NVSHMEM, CCCL) leave the
# venv for /opt/cuda-extras/nvidia, which the runtime copies root-owned into
# site-packages/nvidia (the CUDA layer's folder): like the CUDA stack's wheels, nothing the
# image user runs can rewrite them, and the venv's layer (owned by the user, see below) does
# not take site-packages/nvidia over. Always created, so the runtime's COPY has a source in
# every variant. Their dist-info stays in the venv, for pip's view of what is installed.
# They go as a tree from / (/opt/cuda-extras/tree), whose parent folders are the venv's own, so
# the runtime's COPY of it dates nothing with the build's time (issue 52).
extras=/opt/cuda-extras/tree$site_packages/nvidia
mkdir -p "$extras"
if [ -d "$site_packages"/nvidia ]; then
  mv "$site_packages"/nvidia/* "$extras"/
  rmdir "$site_packages"/nvidia
fi

# tensorflow/include (C++ headers, ~290 MB) only serves compiling custom ops, which
# needs a compiler toolchain this image does not carry; it is left out.
rm -rf "$site_packages"/tensorflow/include

# The in-image package is importable by every Python of the venv, so a user's own script can
# `from kerasenv_image import GpuMonitor` (any --user, `env -i`, subprocesses: a .pth file, not
# PYTHONPATH). Its `import` line runs kerasenv_triton_first.py at every start: where Triton is
# installed (PyTorch), Triton's LLVM is loaded before TensorFlow's (that file says why).
printf '%s\n' /opt/kerasenv 'import kerasenv_triton_first' > "$site_packages"/kerasenv-image.pth

# The venv is made writable for group 0 here, in the layer that creates its files (a chmod
# in the runtime stage would store the whole venv a second time), and the runtime copies it
# owned by 1000:0. So `pip install` works as the image user (uid 1000) and as any
# `--user UID:0` or `--group-add 0` (OpenShift's arbitrary-UID convention; kerasenv run adds
# group 0). Directories are setgid so what a user installs stays group 0 as well. Owned
# 1000:0 here too: the runtime's COPY --from keeps owners (a --chown there re-owned every file
# while copying, 5-10 s of each build).
chown -R 1000:0 "$venv"
chmod -R g+w "$venv"
find "$venv" -type d -exec chmod g+s {} +
# A tree from / (TREE) whose folders above DIR take the owner and mode those folders have here:
# the runtime's COPY of a tree sets the image's folders to the tree's, and their dates with them.
parents_like_here() {
  local tree=$1 dir=$2
  while [ "$dir" != / ]; do
    chown --reference="$dir" "$tree$dir"
    chmod --reference="$dir" "$tree$dir"
    dir=$(dirname "$dir")
  done
  chmod 755 "$tree"
}
# The extras tree's folders above nvidia/ are the venv's; nvidia/ itself is the CUDA parts' (root, 755).
parents_like_here /opt/cuda-extras/tree "$site_packages"

# The same bytes from the same lock (issue 52): pip's bytecode records its source's hash, not its
# install time (SOURCE_DATE_EPOCH in the builder stages), and every file is dated
# SOURCE_DATE_EPOCH, as pip dates them by the install.
epoch=${SOURCE_DATE_EPOCH:-0}
find "$venv" /opt/cuda-extras -exec touch -h -d "@$epoch" {} +
# The runtime copies the venv as a tree from / (/opt/venv-tree/opt/venv, hard links: no second
# copy of its files): a COPY of the folder itself onto the runtime's /opt/venv dated that folder
# with the build's time.
mkdir -p /opt/venv-tree"$(dirname "$venv")"
parents_like_here /opt/venv-tree "$(dirname "$venv")"
cp -al "$venv" /opt/venv-tree"$venv"
# The links share the venv's files, dated above: only the tree's own folders are new.
find /opt/venv-tree -type d -exec touch -h -d "@$epoch" {} +
