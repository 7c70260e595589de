#!/usr/bin/env bash
# The arm64 bases of the matrix's arm64 images, debian:<suite>-slim-arm64 (the local tag: Docker
# 20.10 keeps one image per tag): pulled for linux/arm64, or made with debootstrap under qemu
# (about 2-3 minutes) where no registry answers. Each one already here is left alone.
#
# scripts/test-prereqs.sh runs it beside the amd64 bases. Where `make test` and .ci/run say
# KERASENV_ARM64_BASES=lane, the prerequisites only pull (--pull-only: seconds) and a lane step
# of `make test` makes what no registry gave (--offline-only) beside the first builds: nothing
# needs an arm64 base before the arm64 builds and the integration tests, and in the prerequisites
# the lanes waited for it (the amd64 bases were ready at +79 s, the arm64 one at +138 s). On 2
# busy cores that moved time rather than saved it (the cold run of 312070d: prerequisites 98 s
# against 167 s, the first build beside the debootstrap 157 s against 92 s; its first build
# still ended at +261 s against +263 s). Never a pull beside the builds: a
# pull for linux/arm64 moves the amd64 base's own tag (debian:trixie-slim) until the amd64 image
# is pulled back, and an amd64 build starting then would build on the arm64 base.
#
# Usage: scripts/arm64-bases.sh [--pull-only | --offline-only]
set -euo pipefail
mode=${1:-all}
case "$mode" in all|--pull-only|--offline-only) ;; *)
  printf 'arm64-bases: %s: say --pull-only, --offline-only or nothing\n' "$mode" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
me() { printf 'arm64-bases: %s\n' "$*"; }
fail() { printf 'arm64-bases: %s\n' "$*" >&2; exit 1; }

arm_bases=$(.venv/bin/python - <<'PY'
from kerasenv.matrix import schema
print(" ".join(sorted({v.base_image for v in schema.load().variants if v.arm64})))
PY
)
for base in $arm_bases; do
  local_tag="$base-arm64"
  docker image inspect "$local_tag" >/dev/null 2>&1 && continue
  if [ "$mode" != --offline-only ] && timeout 120 docker pull -q --platform linux/arm64 "$base" >/dev/null 2>&1 \
     && [ "$(docker image inspect -f '{{.Architecture}}' "$base")" = arm64 ]; then
    docker tag "$base" "$local_tag"
    docker pull -q --platform linux/amd64 "$base" >/dev/null  # the tag stays the amd64 one
    continue
  fi
  [ "$mode" != --pull-only ] || continue
  suite=$(sed -n 's/^debian:\([a-z]*\)\(-slim\)\{0,1\}$/\1/p' <<<"$base")
  [ "$(id -u)" -eq 0 ] || fail "cannot pull $base for linux/arm64: run \`sudo make base-offline PLATFORM=linux/arm64\`"
  me "no registry reachable: making $local_tag offline (debootstrap under qemu)"
  .venv/bin/kerasenv base-offline --suite "$suite" --platform linux/arm64
done
