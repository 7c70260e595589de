#!/usr/bin/env bash
# Usage: scripts/sid-root.sh [--check | --quiet]
#        scripts/sid-root.sh run [--bind DIR]... [--env KEY=VALUE]... [--pass-env] [--] COMMAND [ARG]...
# A Debian sid root on this bookworm host, for engines bookworm does not package (issue 43):
# Podman 5 (sid's podman 5.8.x with crun, conmon, netavark, catatonit, runc), later Apptainer.
# They need sid's glibc (>= 2.38), so they run inside the root, not on the host.
#
# - make (no argument): `debootstrap --variant=minbase sid` with the packages below into
#   $SID_ROOT (default /var/lib/kerasenv/sid-root), once: made in a side folder and renamed when
#   complete, so a killed run leaves no half root behind. Safe to rerun: when the root is there
#   and has every package it only looks (about 20 ms). Making it took 73-103 s here (by the
#   machine's load; 33 s of CPU) and 362 MB, 2026-12-06. Sid moves: the versions it got are in
#   $SID_ROOT/.kerasenv-sid-root.versions (podman 5.8.6+ds1-3 then); SID_MIRROR picks the archive.
#   Apptainer's three packages (issue 44) took the root to 533 MB; adding them to a made root: 14 s.
# --check: say in one line what is missing (exit 1), change nothing. --quiet: print only what
#   it changes (scripts/test-prereqs.sh).
# - run: COMMAND inside the root, entered with `unshare --mount` + `pivot_root` (not chroot:
#   Apptainer refuses to start in a chroot, and pivot_root leaves no way back to the host's /).
#   In its own mount namespace: the host's /dev (a fresh /dev/shm: Podman 4 on the host keeps
#   its SHM locks there), /sys (cgroups), a fresh /proc, a fresh /run and /tmp (tmpfs), the
#   host's resolv.conf and CA bundle (the archive and registries are reached through a proxy
#   whose CA is there), its users (/etc/passwd, group, subuid, subgid: rootless engines map
#   the host user's subordinate ids), and each --bind DIR at the same path (e.g. a test's tmp
#   folder, where the engine's storage and its API socket live, so the host reaches the
#   socket). The namespace goes when COMMAND exits; nothing is mounted on the host.
#   COMMAND gets a clean environment (PATH, HOME, LANG, each --env), or with --pass-env the
#   caller's whole environment with the root's PATH (scripts/apptainer-sid-root.sh: a Slurm
#   task's SLURM_* and JAX_* variables must reach the container, issue 44).
set -euo pipefail
ROOT=${SID_ROOT:-/var/lib/kerasenv/sid-root}
MIRROR=${SID_MIRROR:-http://deb.debian.org/debian}
# The engines and what Podman runs containers with: crun (its default runtime) and runc (the one
# that works on this host's hybrid cgroups: crun says "cgroups in hybrid mode not supported"),
# conmon, netavark (its network backend; asked even for --network none), catatonit (--init),
# ca-certificates (pulls). uidmap + passt: rootless Podman (newuidmap, pasta networking).
# apptainer (issue 44) with squashfs-tools (mksquashfs: `apptainer build`; unsquashfs: --unsquash when
# /dev/fuse is out of reach) and squashfuse (mounting a SIF unprivileged, when /dev/fuse is there).
PACKAGES=(podman crun runc conmon netavark catatonit ca-certificates uidmap passt apptainer squashfs-tools squashfuse)
MARK=.kerasenv-sid-root  # the package list it was made with, written last
export PATH="$PATH:/usr/sbin:/sbin"
me() { printf 'sid-root: %s\n' "$*"; }
fail() { printf 'sid-root: %s\n' "$*" >&2; exit 1; }

missing_packages() {  # the PACKAGES the root lacks, space-separated ("" when complete)
  local have=""
  [ -f "$ROOT/$MARK" ] && have=$(cat "$ROOT/$MARK")
  local p out=()
  for p in "${PACKAGES[@]}"; do
    [[ " $have " == *" $p "* ]] || out+=("$p")
  done
  echo "${out[*]}"
}

enter() {  # ROOT BINDS... -- COMMAND...: runs in the new mount namespace (see `run`)
  local root=$1; shift
  local binds=()
  while [ "$1" != "--" ]; do binds+=("$1"); shift; done
  shift
  mount --bind "$root" "$root"  # pivot_root wants a mount point
  mount --rbind /dev "$root/dev"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
  mount --rbind /sys "$root/sys"
  mount -t proc proc "$root/proc"
  mount -t tmpfs -o mode=755,nosuid,nodev run "$root/run"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$root/tmp"
  local f
  # /etc/hosts: Apptainer copies it into every container ("failed to read /etc/hosts" without it).
  for f in /etc/resolv.conf /etc/hosts /etc/ssl/certs/ca-certificates.crt /etc/passwd /etc/group /etc/subuid /etc/subgid; do
    [ -f "$f" ] || continue
    [ -e "$root$f" ] || : >"$root$f"
    mount --bind -o ro "$f" "$root$f"
  done
  local b
  for b in "${binds[@]}"; do
    mkdir -p "$root$b"
    mount --rbind "$b" "$root$b"
  done
  mkdir -p "$root/.host"
  cd "$root"
  pivot_root . .host
  umount -l /.host
  cd /
  exec "$@"
}

case "${1:-}" in
  __enter) shift; enter "$@" ;;
  run)
    shift
    binds=() envs=() clean=(-i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8)
    while [ $# -gt 0 ]; do
      case "$1" in
        --bind) [ -d "${2:-}" ] || fail "--bind ${2:-}: no such folder"; binds+=("$(realpath "$2")"); shift 2 ;;
        --env) envs+=("$2"); shift 2 ;;
        --pass-env) clean=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin); shift ;;
        --) shift; break ;;
        *) break ;;
      esac
    done
    [ $# -gt 0 ] || fail "run: no command"
    [ "$(id -u)" -eq 0 ] || fail "run needs root (unshare --mount, pivot_root): sudo $0 run ..."
    [ -z "$(missing_packages)" ] || fail "no complete sid root at $ROOT: run \`sudo $0\`"
    exec unshare --mount --propagation private -- "$0" __enter "$ROOT" "${binds[@]}" -- \
      env "${clean[@]}" "${envs[@]}" "$@"
    ;;
esac

check_only=0 quiet=0
[ "${1:-}" = "--check" ] && check_only=1
[ "${1:-}" = "--quiet" ] && quiet=1
lacking=$(missing_packages)
if [ -z "$lacking" ]; then
  [ "$quiet" -eq 1 ] || me "$ROOT has ${PACKAGES[*]} ($(cat "$ROOT/$MARK.versions" 2>/dev/null | tr '\n' ' '))"
  exit 0
fi
if [ "$check_only" -eq 1 ]; then
  if [ -d "$ROOT" ]; then
    fail "$ROOT lacks ${lacking}: run \`sudo scripts/sid-root.sh\`"
  fi
  fail "no sid root at $ROOT (Podman 5 and Apptainer for tests/integration/test_podman5.py and test_apptainer.py): run \`sudo scripts/sid-root.sh\` (debootstrap: about 90-120 s, 530 MB)"
fi
[ "$(id -u)" -eq 0 ] || fail "making $ROOT needs root: run \`sudo $0\`"
command -v debootstrap >/dev/null || fail "debootstrap is not installed: sudo apt-get install -y debootstrap"
started=$(date +%s)
if [ -d "$ROOT" ]; then
  # A root made with fewer packages: add the rest, with sid's apt, inside it. (The archive
  # this host reaches may serve an older snapshot of sid, whose Release is past Valid-Until.)
  me "adding $lacking to $ROOT"
  unshare --mount --propagation private -- "$0" __enter "$ROOT" -- \
    sh -c "apt-get -o Acquire::Check-Valid-Until=false update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $lacking >/dev/null && apt-get clean"
else
  side="$ROOT.making"
  rm -rf "$side"
  mkdir -p "$(dirname "$ROOT")"
  me "debootstrap --variant=minbase sid $ROOT ($MIRROR; ${PACKAGES[*]})"
  include=$(IFS=,; echo "${PACKAGES[*]}")
  # A download the mirror did not deliver is tried again from an empty folder, up to 3 times (a
  # cold CI run lost its arm64 base to "E: Couldn't download packages", 2026-12-06: the same
  # rule as kerasenv base-offline: these are its TRANSIENT lines, src/kerasenv/images/base_offline.py,
  # and tests/unit/repo/test_sid_root.py keeps the two lists equal).
  transient="Couldn't download|Failed getting release file|Failed getting release signature file|Couldn't get|Temporary failure resolving|Connection timed out"
  for try in 1 2 3; do
    debootstrap --variant=minbase --include="$include" sid "$side" "$MIRROR" >"$side.log" 2>&1 && break
    if [ "$try" -lt 3 ] && tail -1 "$side.log" | grep -qE "$transient"; then
      me "debootstrap: $(tail -1 "$side.log"): trying again ($((try + 1)) of 3)"
      rm -rf "$side"; sleep 10; continue
    fi
    tail -5 "$side.log" >&2
    fail "debootstrap failed (whole log: $side.log)"
  done
  # The .debs are not needed once installed (80 MB).
  rm -f "$side"/var/cache/apt/archives/*.deb
  rm -f "$side.log"
  mv "$side" "$ROOT"
fi
chroot "$ROOT" dpkg-query -W -f '${Package} ${Version}\n' "${PACKAGES[@]}" >"$ROOT/$MARK.versions"
echo " ${PACKAGES[*]} " >"$ROOT/$MARK"
me "made $ROOT in $(( $(date +%s) - started )) s, $(du -sh "$ROOT" | cut -f1) ($(grep -E '^(podman|runc|crun) ' "$ROOT/$MARK.versions" | tr '\n' ' '))"
