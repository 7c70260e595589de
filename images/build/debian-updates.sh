#!/bin/bash
# Usage: debian-updates.sh --point-release STATE PACKAGE...
#        debian-updates.sh STATE [PACKAGE...]
# Debian's packages of an image at one state of Debian's archive, in two steps (issue 52):
#
# --point-release: the base suite's point release only (the suite's own dist, never -updates or
#   -security), for python-base and every step below the runtime's last one. STATE is
#   "<suite>@<Date>" (the dist's signed InRelease Date, UTC, build arg DEBIAN_POINT_RELEASE), which
#   moves only when Debian publishes a point release (every two months or so): so these layers,
#   and the builder stages' cache on them, survive a weekly security rebuild. Written to
#   /etc/kerasenv/debian-point-release. The step's files are dated SOURCE_DATE_EPOCH
#   (clamp-mtimes.sh) and it leaves no log, apt list or ldconfig aux-cache, so the same state
#   gives the same layer, byte for byte.
# STATE alone: the runtime's last step. Applies the suite's point-release, -updates and -security
#   fixes of STATE ("<suite>@<Date> <suite>-updates@<Date> <suite>-security@<Date>", build arg
#   DEBIAN_UPDATES, the label io.kerasenv.debian-updates), written to /etc/kerasenv/debian-updates,
#   which the acceptance suite compares with the label. What Debian fixed since the point release
#   lands in that last layer only; every layer below it stays byte-identical.
# Both: apt must see exactly STATE (the dists of the image's sources), or the build stops (the
# archive published between the two reads: build again). "unknown" (a plain `docker build`) skips
# the comparison.
# Why the fixes at all: the debootstrap'd base carries the point release only, and later
# `apt-get install`s upgrade just what they pull in; 12 packages with published security fixes
# (zlib1g, liblzma5, libzstd1, PAM, apt, perl-base, tzdata, ...) stayed unpatched in every image
# (issue 31). Why last: Docker's classic image store keys a layer by the chain below it, so a
# fix in the second layer made every user download the whole image again (issue 52).
set -euo pipefail
mode=updates
if [ "${1:-}" = --point-release ]; then mode=point-release; shift; fi
state=$1
shift
started=$(date +%s)
suite=${state%%@*}
if [ "$state" = unknown ]; then suite=$(. /etc/os-release && echo "$VERSION_CODENAME"); fi
apt_opts=()
# A state that names the point release alone (`kerasenv build --debian-updates point-release`:
# release N of `kerasenv bench-update`, the CI check that a security rebuild changes only the last
# layer) applies no -updates or -security fix in the last step either.
only_point_release=no
if [ "$mode" = point-release ] || { [ "$state" != unknown ] && [[ "$state" != *-updates@* ]] && [[ "$state" != *-security@* ]]; }; then
  only_point_release=yes
fi
if [ "$only_point_release" = yes ]; then
  # The suite's own dist alone: a sources list of our own (point-release-sources.sh).
  sources=$(mktemp -d)
  bash "$(dirname "$0")"/point-release-sources.sh "$suite" /etc/apt "$sources"
  apt_opts=(-o "Dir::Etc::SourceList=$sources/sources.list" -o "Dir::Etc::SourceParts=$sources/parts")
fi
# apt-get update exits 0 when a dist cannot be fetched ("W: Failed to fetch ...", old or no lists
# used): a build with no route to the archive then looked like an archive that had moved on, and
# said "build again" (issue 45). Its output is kept to tell the two apart: nothing fetched is the
# network's fault, named with the host apt could not reach.
update_log=$(mktemp)
apt-get "${apt_opts[@]}" update -qq -o Acquire::Retries=3 >"$update_log" 2>&1 || true
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
apt-get "${apt_opts[@]}" -y -qq -o Dpkg::Options::=--force-confold --with-new-pkgs upgrade
if [ $# -gt 0 ]; then apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "$@"; fi
left=$(apt "${apt_opts[@]}" list --upgradable 2>/dev/null | grep -c upgradable || true)
if [ "$left" != 0 ]; then
  apt "${apt_opts[@]}" list --upgradable >&2
  echo "debian-updates.sh: $left package(s) still upgradable after the upgrade" >&2
  exit 1
fi
install -d /etc/kerasenv
if [ "$state" = unknown ]; then state=$seen; fi  # else the same, in the label's order
if [ "$mode" = point-release ]; then
  printf '%s\n' "$state" > /etc/kerasenv/debian-point-release
else
  printf '%s\n' "$state" > /etc/kerasenv/debian-updates
fi
if [ "$only_point_release" = yes ]; then rm -rf "$sources"; fi
# What apt and dpkg leave that differs from build to build: their logs, lists and package caches,
# and ldconfig's aux-cache (inode numbers and times; `make base-offline` leaves none in the base,
# so deleting it here leaves no whiteout either). Files only, never a folder of the base (a
# deleted folder of a lower layer is a whiteout, dated when it was made).
# apt's own lists/partial and lock stay: the base has them, and their deletion would be one.
find /var/lib/apt/lists -mindepth 1 -maxdepth 1 ! -name partial ! -name lock -exec rm -rf {} +
rm -rf /var/cache/apt/archives/*.deb /var/cache/apt/*.bin /var/cache/ldconfig/aux-cache
rm -f /var/log/apt/* /var/log/dpkg.log /var/log/alternatives.log
if [ "$mode" = point-release ]; then
  here=$(dirname "$0")
  bash "$here"/clamp-mtimes.sh "$started"
  # fontconfig's caches (Graphviz's fonts) record each font folder's mtime, which the clamp has
  # just changed: made again over the dated folders, they are the same bytes in every build,
  # and fontconfig does not find them stale at run time.
  if command -v fc-cache >/dev/null; then
    fc-cache -s -f
    bash "$here"/clamp-mtimes.sh "$started"
  fi
fi
