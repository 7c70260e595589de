#!/usr/bin/env bash
# Usage: scripts/arm64-emulation.sh [--check | --quiet]
# Makes this amd64 machine run linux/arm64 programs (the arm64 images' build steps and checks,
# issue 36): qemu-user-static >= 10 and its binfmt_misc entry for aarch64. Safe to rerun: when
# all is there it only looks. --check: say what is missing (one line, exit 1), change nothing.
# --quiet: print only what it changes (scripts/test-prereqs.sh).
#
# Why these and not others (shared/reference/compatibility.md, "qemu for arm64"):
# - qemu >= 10: bookworm's qemu 7.2 hung at `import torch` (aarch64, PyTorch 2.15); 10.0.2 from
#   bookworm-backports (trixie: 10.0.x in the suite itself) runs it. Older than 10 is refused.
# - qemu's default CPU model (`max`) has the LSE atomics PyTorch >= 2.10's aarch64 wheels need
#   (bundled mimalloc); a cortex-a57 model dies with SIGILL (vectorize-io/hindsight#4201). The
#   registration keeps `max`; the acceptance suite gives each emulated container QEMU_CPU=neoverse-n2
#   (smoke_tests/platforms.py: Grace's 128-bit SVE2, LSE included; `max` has 512-bit SVE and SME).
# - The 10.x packages register through systemd's /usr/lib/binfmt.d/qemu-aarch64.conf (package
#   qemu-user-binfmt), not binfmt-support: without systemd (containers, CI) that line is written to
#   /proc/sys/fs/binfmt_misc/register here. Its F flag opens the interpreter at registration, so
#   it also runs inside containers and chroots, which do not have /usr/bin/qemu-aarch64-static.
set -euo pipefail
check_only=0 quiet=0 changed=0
[ "${1:-}" = "--check" ] && check_only=1
[ "${1:-}" = "--quiet" ] && quiet=1
me() { printf 'arm64-emulation: %s\n' "$*"; }
fail() { printf 'arm64-emulation: %s\n' "$*" >&2; exit 1; }
binfmt=/proc/sys/fs/binfmt_misc
entry=$binfmt/qemu-aarch64
qemu=/usr/bin/qemu-aarch64-static
min_major=10

qemu_major() { "$qemu" --version 2>/dev/null | sed -n 's/^qemu-aarch64 version \([0-9]*\)\..*/\1/p'; }
registered() { [ -f "$entry" ] && grep -qx enabled "$entry"; }

if [ "$check_only" -eq 1 ]; then
  [ -x "$qemu" ] || fail "qemu-user-static is not installed: run \`sudo bash scripts/arm64-emulation.sh\`"
  [ "$(qemu_major)" -ge "$min_major" ] 2>/dev/null \
    || fail "qemu $("$qemu" --version | sed -n 1p | awk '{print $3}') is too old (PyTorch's aarch64 import hangs before 10): run \`sudo bash scripts/arm64-emulation.sh\`"
  registered || fail "no binfmt_misc entry for aarch64: run \`sudo bash scripts/arm64-emulation.sh\`"
  echo "arm64-emulation: qemu $(qemu_major).x registered for aarch64 ($(sed -n 's/^flags: //p' "$entry"))"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get, binfmt_misc): run \`sudo bash scripts/arm64-emulation.sh\`"

if ! [ -x "$qemu" ] || ! [ "$(qemu_major)" -ge "$min_major" ] 2>/dev/null; then
  . /etc/os-release
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    # bookworm's own qemu is 7.2: take 10.x from bookworm-backports (Debian's archive).
    list=/etc/apt/sources.list.d/kerasenv-bookworm-backports.list
    [ -f "$list" ] || echo "deb http://deb.debian.org/debian bookworm-backports main" > "$list"
    me "apt-get install -t bookworm-backports qemu-user-static"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-user-static qemu-user-binfmt >/dev/null
    changed=1
  else
    me "apt-get install qemu-user-static"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends qemu-user-static qemu-user-binfmt >/dev/null
    changed=1
  fi
  [ "$(qemu_major)" -ge "$min_major" ] 2>/dev/null || fail "installed qemu $(qemu_major) < $min_major: this Debian has no qemu >= $min_major (trixie or bookworm-backports has)"
fi

if ! [ -f "$binfmt/register" ]; then
  mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || fail "cannot mount binfmt_misc on $binfmt (a container without privileges?): run this on the host"
fi
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
[ -f "$conf" ] || fail "$conf is missing (package qemu-user-binfmt): reinstall qemu-user-static"
line=$(grep -v '^#' "$conf" | sed -n '/^:qemu-aarch64:/p')
want_flags=$(cut -d: -f8 <<<"$line")
interpreter=$(cut -d: -f7 <<<"$line")  # the package's wrapper for the P flag, which runs $qemu
if [ -f "$entry" ] && ! grep -qx "interpreter $interpreter" "$entry"; then
  # Registered by something else (binfmt-support with bookworm's 7.2, tonistiigi/binfmt): ours
  # replaces it, or the old qemu would keep running arm64 code.
  me "replacing the aarch64 entry of $(sed -n 's/^interpreter //p' "$entry")"
  echo -1 > "$entry"
fi
if ! [ -f "$entry" ]; then
  me "registering $qemu for aarch64 (flags $want_flags)"
  printf '%s' "$line" > "$binfmt/register"
  changed=1
fi
registered || fail "the aarch64 entry is not enabled: echo 1 > $entry"
[ "$quiet" -eq 1 ] && [ "$changed" -eq 0 ] && exit 0
me "qemu $(qemu_major).x runs linux/arm64 ($(sed -n 's/^flags: //p' "$entry"))"
