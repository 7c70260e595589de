#!/bin/bash
# Usage: clamp-mtimes.sh START [ROOT]
# Dates every file and folder under ROOT (default /) that this build step wrote, that is with an
# mtime at or after START (seconds since the epoch, taken when the step began), SOURCE_DATE_EPOCH
# (default 0, as split-cuda-layers.sh does), so the step's layer is the same bytes whenever it is
# built (issue 52). A layer's tar records each entry's mtime, folders included: `/etc` after a
# useradd, `/tmp` after a mktemp. Files an apt step unpacks keep the package's own dates, which
# are older than START and the same in every build. Stays on ROOT's file system (-xdev: not
# /proc, /sys, /dev) and leaves alone the files the engine mounts into the build's container.
# What it cannot reach: a deleted file of a lower layer, whose whiteout in this layer is dated
# when it was deleted. So no step above the base deletes a lower layer's file, except the
# runtime's last, which changes with every security state anyway.
set -euo pipefail
start=$1 root=${2:-/}
epoch=${SOURCE_DATE_EPOCH:-0}
find "$root" -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /etc/hosts -o -path /etc/hostname \
    -o -path /etc/resolv.conf -o -path /.dockerenv \) -prune -o -newermt "@$(( start - 1 ))" -print0 \
  | xargs -0r touch -h -d "@$epoch"
