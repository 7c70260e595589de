#!/usr/bin/env bash
# Usage: scripts/apptainer-sid-root.sh APPTAINER-ARGS...   (or a link to it named `apptainer`)
# `apptainer` for this bookworm host (issue 44): Debian sid's apptainer 1.4.5 needs glibc >= 2.38,
# so it lives in the sid root (scripts/sid-root.sh), and this runs it there with the caller's
# environment. On a cluster node `apptainer` is installed: nothing here is needed there, and
# slurm/kerasenv-jax-apptainer.sbatch is the same file on both.
#
# Why a shim on the task's PATH and not Slurm from the same root: Slurm (bookworm's 22.05.8,
# scripts/slurm-local.sh) runs on the host; a task starts `apptainer` with the task's SLURM_*
# variables, and this passes them through (sid-root.sh run --pass-env: its default `env -i` would
# drop them, and JAX finds its Slurm job from them). A second slurmd in the root would be a second
# cluster to keep, and would test sid's Slurm instead of the host's.
#
# - Apptainer runs unprivileged here (root lacks CAP_SYS_RESOURCE; sid's package has no setuid
#   starter), in a user namespace, as a non-root uid: the caller's own, or, when the caller is root
#   (a test, a job submitted by root), KERASENV_APPTAINER_USER (default kerasenv-rootless, which
#   scripts/test-prereqs.sh makes). Clusters run it as the job's user, the same way.
# - The root sees only what is bound into it: the working directory, the caller's home (Apptainer
#   binds $HOME into the container by default, as on a cluster), APPTAINER_TMPDIR, and each
#   argument that names a path or a file's folder (a SIF, --bind SRC[:DST], docker-archive:TAR).
# - APPTAINER_TMPDIR defaults to /var/tmp/kerasenv-apptainer: the root's /tmp is a tmpfs (memory),
#   and `build` and `--unsquash` unpack the whole image there (2.6 GB for jax0.12-cpu).
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
fail() { printf 'apptainer (sid root): %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "entering the sid root needs root (unshare --mount): run it as root on this host"
user=${KERASENV_APPTAINER_USER:-kerasenv-rootless}
uid=$(id -u "$user" 2>/dev/null) || fail "no user $user to run Apptainer as (it refuses to run as root without privileges here): useradd $user, or KERASENV_APPTAINER_USER=<a user>"
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
export APPTAINER_TMPDIR=${APPTAINER_TMPDIR:-/var/tmp/kerasenv-apptainer}
install -d -m 1777 "$APPTAINER_TMPDIR"

binds=(--bind "$APPTAINER_TMPDIR")
[ "$PWD" = / ] || binds+=(--bind "$PWD")
[ -d "$home" ] && binds+=(--bind "$home")
for arg in "$@"; do
  # A path, SRC of --bind SRC:DST, or the path of docker-archive:PATH; a file that is not there
  # yet (build's output): its folder.
  for candidate in "$arg" "${arg%%:*}" "${arg#*:}"; do
    [ "$candidate" != / ] && [ "${candidate:0:1}" = / ] || continue
    if [ -d "$candidate" ]; then
      binds+=(--bind "$candidate")
    elif [ -d "$(dirname "$candidate")" ] && [ "$(dirname "$candidate")" != / ]; then
      binds+=(--bind "$(dirname "$candidate")")
    fi
  done
done
# HOME and USER as a login would set them: Apptainer binds $HOME into the container.
exec "$here/sid-root.sh" run "${binds[@]}" --pass-env -- \
  setpriv --reuid="$uid" --regid="$gid" --clear-groups \
  env HOME="$home" USER="$user" LOGNAME="$user" sh -c 'cd "$0" && exec apptainer "$@"' "$PWD" "$@"
