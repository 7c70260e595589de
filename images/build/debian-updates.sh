#!/bin/bash
# Usage: debian-updates.sh STATE PACKAGE...
# The base stage's Debian packages with its suite's point-release, -updates and -security fixes
# applied, reproducibly for one state of Debian's archive. STATE is what `kerasenv build` read
# from the archive just before the build, for the base image's suite only ("<suite>@<Date>
# <suite>-updates@<Date> <suite>-security@<Date>", e.g. trixie or bookworm, each dist's signed
# InRelease Date, UTC): the build arg that keys this step and becomes the label
# io.kerasenv.debian-updates. apt must see exactly that state (the dists of the image's sources),
# or the build stops (the archive published between the two reads: build again). "unknown"
# (a plain `docker build`) skips the comparison. Either way the state apt saw is written to
# /etc/kerasenv/debian-updates, which the acceptance suite compares with the label.
# Why: the debootstrap'd base carries the point release only, and later `apt-get install`s
# upgrade just what they pull in; 12 packages with published security fixes (zlib1g, liblzma5,
# libzstd1, PAM, apt, perl-base, tzdata, ...) stayed unpatched in every image (issue 31).
set -euo pipefail
state=$1
shift
# apt-get update exits 0 when a dist cannot be fetched ("W: Failed to fetch ...", old or no lists
# used): a build with no route to the archive then looked like an archive that had moved on, and
# said "build again" (issue 45). Its output is kept to tell the two apart: nothing fetched is the
# network's fault, named with the host apt could not reach.
update_log=$(mktemp)
apt-get update -qq -o Acquire::Retries=3 >"$update_log" 2>&1 || true
cat "$update_log" >&2
failed=$(grep -m1 -E '^(W|E): Failed to fetch ' "$update_log" || true)
if [ -n "$failed" ]; then
  url=$(sed -E 's/^(W|E): Failed to fetch ([^ ]+).*/\2/' <<<"$failed")
  host=$(sed -E 's#^[a-z+]+://([^/:]+).*#\1#' <<<"$url")
  why=$(sed -E 's/^(W|E): Failed to fetch [^ ]+ *//' <<<"$failed")
  echo "debian-updates.sh: Debian's archive could not be reached from the build: $host (${why:-no answer}):" \
    "the build's network or proxy is the cause, not the archive's state; let the build reach $host" \
    "(DNS, firewall, or a proxy passed as the http_proxy build argument) and build again;" \
    "\`make base-offline\` does not help here (it makes the base from the archive too)" >&2
  exit 1
fi
rm -f "$update_log"
seen=$(for f in /var/lib/apt/lists/*_InRelease; do
  dist=$(awk '/^Codename: /{print $2; exit}' "$f")
  when=$(awk '/^Date: /{sub(/^Date: /, ""); print; exit}' "$f")
  printf '%s@%s\n' "$dist" "$(date -u -d "$when" +%Y-%m-%dT%H:%M:%SZ)"
done | sort | paste -sd' ')
want=$(printf '%s\n' $state | sort | paste -sd' ')
if [ "$state" != unknown ] && [ "$seen" != "$want" ]; then
  echo "debian-updates.sh: Debian's archive is at \"$seen\", the build was asked for \"$want\" (it published in between): build again" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# --with-new-pkgs: a fix that needs a new dependency is applied, not held back; nothing is removed.
apt-get -y -qq -o Dpkg::Options::=--force-confold --with-new-pkgs upgrade
apt-get install -y -qq --no-install-recommends "$@"
left=$(apt list --upgradable 2>/dev/null | grep -c upgradable || true)
if [ "$left" != 0 ]; then
  apt list --upgradable >&2
  echo "debian-updates.sh: $left package(s) still upgradable after the upgrade" >&2
  exit 1
fi
install -d /etc/kerasenv
if [ "$state" = unknown ]; then state=$seen; fi  # else the same, in the label's order
printf '%s\n' "$state" > /etc/kerasenv/debian-updates
rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/log/apt /var/log/dpkg.log
