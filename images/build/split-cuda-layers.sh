#!/bin/bash
# Usage: split-cuda-layers.sh SRC DEST N PREFIX
# Move the CUDA wheels installed under SRC (pip --target)
# into DEST/1 .. DEST/N, N parts of similar size, each a tree from / (PREFIX, e.g.
# /opt/venv/lib/python3.11/site-packages, inside it), so the runtime stage can `COPY` each part
# to / as a layer of its own. Why parts: a registry client fetches layers in parallel and
# unpacks one while the next arrives (benchmarks/pull.md has the measurement).
#
# One library (nvidia/<lib>/) is never split. The biggest goes first, into the part holding
# the least so far (ties: the lower number), so the same wheels always give the same parts.
# Metadata (dist-info, nvidia/__init__.py) goes with the last part.
#
# Byte-identical layers across rebuilds: every mtime is set to SOURCE_DATE_EPOCH (default 0)
# and pip's bytecode (which records its source's install time) is dropped. The parts carry
# their parent directories from / for the same reason: a `COPY` into a directory that does
# not exist yet creates it with the build's time, and the layer's digest with it.
set -euo pipefail
src=$1 dest=$2 parts=$3 prefix=${4#/}
epoch=${SOURCE_DATE_EPOCH:-0}
declare -a load
for i in $(seq 1 "$parts"); do load[$i]=0; mkdir -p "$dest/$i/$prefix/nvidia"; done
while read -r kb lib; do
  best=1
  for i in $(seq 2 "$parts"); do [ "${load[$i]}" -lt "${load[$best]}" ] && best=$i; done
  mv "$src/$lib" "$dest/$best/$prefix/nvidia/"
  load[$best]=$(( load[best] + kb ))
done < <(cd "$src" && du -sk nvidia/*/ | sed 's:/$::' | sort -k1,1nr -k2,2)
cp -a "$src"/. "$dest/$parts/$prefix/"  # what is left: dist-info, nvidia/__init__.py
rm -rf "$src"
# The wheels' Python is a few empty __init__.py files: nothing is lost with the bytecode.
find "$dest" -name __pycache__ -type d -prune -exec rm -rf {} +
find "$dest" -exec touch -h -d "@$epoch" {} +
for i in $(seq 1 "$parts"); do echo "part $i: $(( load[i] / 1024 )) MB: $(ls "$dest/$i/$prefix/nvidia" | tr '\n' ' ')"; done
