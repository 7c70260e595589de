#!/bin/bash
# Usage: image-tree.sh TREE CODE [--cuda]
# The runtime's own files outside the venv as one tree from /, for one `COPY --from=image-tree
# TREE/ /` (issue 52): the image user `keras` (uid 1000) with its home, /workspace and
# /workspace/runs, the empty /opt/venv the venv is copied into, the in-image code (CODE, copied
# from the build context) at /opt/kerasenv, and with --cuda the CUDA JIT cache's folder. Made in a
# stage of its own and copied whole, because a RUN in the runtime would leave the time of the
# build in its layer: /etc/shadow's date of the last password change, the folders' mtimes, the
# build context's mtimes (a fresh clone dates every file when it was checked out).
# Every entry is dated SOURCE_DATE_EPOCH (default 0) and every parent folder comes with the
# owner, mode and date it has in the image, so the layer is the same bytes from the same files.
set -euo pipefail
tree=$1 code=$2 cuda=${3:-}
epoch=${SOURCE_DATE_EPOCH:-0}
useradd --create-home --uid 1000 --user-group --shell /bin/bash keras
# The date of the last password change (days since 1970) would be the day of the build: empty,
# which shadow(5) reads as "password aging off" (the account has no password anyway).
sed -i -E 's/^(keras:[^:]*:)[0-9]*:/\1:/' /etc/shadow
install -d -o keras -g keras /workspace
install -d -o keras -g keras -m 1777 /workspace/runs
install -d -o keras -g root -m 2775 /opt/venv
install -d -o root -g root -m 755 /opt/kerasenv
cp -r "$code"/. /opt/kerasenv/
chown -R root:root /opt/kerasenv
chmod -R u=rwX,go=rX /opt/kerasenv
paths=(/etc/passwd /etc/group /etc/shadow /etc/gshadow /home/keras /workspace /opt/venv /opt/kerasenv)
if [ "$cuda" = --cuda ]; then
  install -d -m 1777 /var/cache/kerasenv/cuda
  paths+=(/var/cache/kerasenv)
fi
mkdir "$tree"
# --parents with -a: each parent folder is made with the owner and mode it has here (/ /etc
# /home /opt /var /var/cache), then everything is dated.
cp -a --parents "${paths[@]}" "$tree"/
chmod 755 "$tree"
find "$tree" -exec touch -h -d "@$epoch" {} +
