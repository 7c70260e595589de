#!/usr/bin/env bash
# What `make test` needs besides Docker and make, installed or started when missing, so the
# README's test command passes on a fresh machine (issue 15). `make test` runs this first,
# `.ci/run` too: one implementation. Safe to rerun; when everything is there it only looks
# (well under 2 s).
#
# As root it installs (Debian/apt) and starts what is missing. As another user it does the
# per-user parts itself (the tooling venv, the Compose v2 CLI plugin in ~/.docker) and, when
# something needs root, stops with ONE line naming what is missing and the command that
# installs it, so nothing fails later in the middle of an hour-long suite.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# The engine `make test` runs on (issue 43): docker28, Docker 28.5.2 with the containerd image
# store on /var/run/docker.sock (what users run; fresh Docker 29 installs default to that store),
# and Debian 12's Docker 20.10, the declared floor, as a second daemon on $FLOOR_SOCKET for the
# floor lane (`make test-floor`); debian: Debian 12's docker.io 20.10 as the only engine.
# scripts/docker-current.sh installs and starts both. The default stays debian: the first cold
# .ci/run on docker28 (2026-12-06) ran every step 2-3x slower than the last one on 20.10 (builds:
# jax0.12-cpu 262 s against 78 s, tf2.21-cpu 247 s against 53 s; the containerd store also writes
# each layer compressed) and was stopped at +947 s on course for well over CI's 50-minute budget
# (docs/using/engines.md); making docker28 the default waits for a run that fits.
MAIN_ENGINE=${KERASENV_MAIN_ENGINE:-debian}
machine=$(uname -m 2>/dev/null || true)  # forky's packages unpacked here are amd64's
FLOOR_SOCKET=/run/kerasenv-docker20.sock
case "$MAIN_ENGINE" in docker28|debian) ;; *)
  printf 'test-prereqs: KERASENV_MAIN_ENGINE=%s: choose docker28 (Docker 28.5.2, containerd store) or debian (Docker 20.10)\n' "$MAIN_ENGINE" >&2; exit 1 ;;
esac
me() { printf 'test-prereqs: %s\n' "$*"; }
fail() { printf 'test-prereqs: %s\n' "$*" >&2; exit 1; }
is_root() { [ "$(id -u)" -eq 0 ]; }
# Debian keeps daemons and debootstrap in /usr/sbin, which a normal user's PATH lacks.
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
docker_up() { timeout 10 docker version >/dev/null 2>&1; }
# Under `sudo make test-prereqs` the per-user parts (venv, ~/.docker) belong to the user
# who typed it, not to root: a root-owned .venv would break their next `make test`.
as_invoker() {
  if is_root && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && command -v sudo >/dev/null; then
    sudo -u "$SUDO_USER" -H -- "$@"
  else
    "$@"
  fi
}

# --- 1. what needs root: Debian packages, the devcontainer CLI, a running Docker daemon ---
# Checked by command, not by dpkg, so tools from elsewhere (docker-ce, NodeSource's node,
# a Docker Desktop socket) count as present.
# Two lists: the engine side with its Recommends, as .ci/run always installed it (docker.io
# recommends ca-certificates for pulls; debootstrap the archive keyring), the rest without:
# chromium's Recommends are ~100 desktop packages (systemd-sysv among them), npm's node-tap.
with_recommends=() packages=()
need_pkg() { have "$1" || packages+=("$2"); }
have docker-registry || with_recommends+=(docker-registry)  # the local registry of the push/pull tests
have debootstrap || with_recommends+=(debootstrap)          # `make base-offline` where no registry answers
if [ "$MAIN_ENGINE" = docker28 ] && [ "$machine" = x86_64 ]; then
  # Debian's dockerd 20.10 for the floor daemon (Docker 28 itself is unpacked from forky's
  # packages by scripts/docker-current.sh, never installed with apt); runc is Docker 28's runtime.
  # Only where no engine answers yet: where one does, it is left as it is (see below).
  if ! docker_up; then
    have dockerd || with_recommends+=(docker.io)
  fi
elif ! docker_up; then
  have dockerd || with_recommends+=(docker.io)  # Debian's engine, only where no daemon runs and none is installed
fi
need_pkg tmux tmux
need_pkg skopeo skopeo                    # zstd pushes (kerasenv push --compression zstd)
need_pkg ctr containerd                   # a throwaway containerd pulls the zstd image (docker.io brings it)
need_pkg chromium chromium                # the headless-browser tests
need_pkg podman podman                    # Podman behind DOCKER_HOST (tests/integration/test_podman.py)
[ -x /usr/libexec/podman/catatonit ] || packages+=(catatonit)  # Podman's --init (kerasenv runs every container with one)
need_pkg newuidmap uidmap                 # rootless Podman's user namespace
need_pkg node nodejs                      # npm installs the devcontainer CLI
need_pkg npm npm
if [ ! -f .venv/.installed ] && ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  have "$PYTHON" || packages+=(python3)
  packages+=(python3-venv)                # Debian splits `python3 -m venv` out of python3
fi
need_devcontainer=0
have devcontainer || need_devcontainer=1

if ! is_root; then
  missing=("${with_recommends[@]}" "${packages[@]}") commands=()
  [ "${#missing[@]}" -eq 0 ] || commands+=("sudo apt-get install -y ${missing[*]}")
  if [ "$need_devcontainer" -eq 1 ]; then
    missing+=("the devcontainer CLI")
    commands+=("sudo npm install -g @devcontainers/cli")
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    list=$(printf '%s, ' "${missing[@]}"); list=${list%, }
    fail "missing ${list}: run \`sudo make test-prereqs\` (or: $(printf '%s && ' "${commands[@]}" | sed 's/ && $//'))"
  fi
  if ! docker_up; then
    if [ -z "${DOCKER_HOST:-}" ] && [ -S /var/run/docker.sock ] && ! [ -w /var/run/docker.sock ]; then
      fail "the Docker daemon is running but $(id -un) may not use /var/run/docker.sock: run \`sudo usermod -aG docker $(id -un)\` and log in again"
    fi
    fail "the Docker daemon is not reachable: run \`sudo make test-prereqs\` (it starts dockerd) or \`sudo systemctl start docker\`"
  fi
fi

all_packages=("${with_recommends[@]}" "${packages[@]}")
if [ "${#all_packages[@]}" -gt 0 ]; then
  me "apt-get install ${all_packages[*]}"
  apt-get update -qq
  # NEEDRESTART_SUSPEND: needrestart (a docker.io Recommends) would ask which services to restart.
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
  [ "${#with_recommends[@]}" -eq 0 ] || apt-get install -y -qq "${with_recommends[@]}" >/dev/null
  [ "${#packages[@]}" -eq 0 ] || apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi
if [ "$need_devcontainer" -eq 1 ]; then
  me "npm install -g @devcontainers/cli"
  npm install -g --silent @devcontainers/cli >/dev/null
fi
drop_stale_pid() {  # FILE NAME: remove FILE unless its pid is a running NAME process
  local file=$1 name=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then return 0; fi
  me "removing the stale $file (pid ${pid:-none} is not a running $name)"
  rm -f "$file"
}
if [ "$MAIN_ENGINE" = docker28 ] && [ "$machine" = x86_64 ] && is_root && [ -z "${DOCKER_HOST:-}" ]; then
  # Docker 28.5.2 with the containerd store as THE engine, where nothing answers on the main
  # socket yet (CI, a fresh machine). A daemon already there is never stopped from here: it may
  # be building someone's images; one line says how to switch instead.
  if ! docker_up; then
    drop_stale_pid /var/run/docker.pid dockerd
    drop_stale_pid /var/run/docker/containerd/containerd.pid containerd
    bash scripts/docker-current.sh main
    hash -r  # `docker` is now Docker 28's CLI (/usr/local/bin/docker)
  fi
  now=$(bash scripts/docker-current.sh which)
  case "$now" in
    28.5.2*containerd)
      # The floor: Debian 12's Docker 20.10 as a second daemon (own socket, data root, bridge).
      have dockerd || fail "no dockerd 20.10 for the floor lane: run \`apt-get install docker.io\` (Debian 12's)"
      bash scripts/docker-current.sh floor ;;
    *) me "the engine on /var/run/docker.sock is Docker $now, not Docker 28.5.2 with the containerd image store (KERASENV_MAIN_ENGINE=docker28): testing on it as it is, no floor lane; to switch, stop that dockerd and rerun \`sudo make test-prereqs\`, or set KERASENV_MAIN_ENGINE=debian to say so" ;;
  esac
fi
if ! docker_up; then
  if [ -d /run/systemd/system ] && systemctl cat docker.service >/dev/null 2>&1; then
    me "systemctl start docker"
    systemctl start docker
  else
    # No systemd (a container, this CI): dockerd in its own session, so a Ctrl-C to
    # `make test` does not stop the daemon under the tests.
    # A pid file left by a daemon that did not stop cleanly (a machine restored from a snapshot,
    # a killed container) names a pid that another process may now have: dockerd then takes
    # containerd for running, waits for a socket nobody serves and gives up after a minute
    # ("libcontainerd: containerd is still running", measured here). A pid file whose process is
    # not that daemon is stale: remove it.
    drop_stale_pid /var/run/docker.pid dockerd
    drop_stale_pid /var/run/docker/containerd/containerd.pid containerd
    me "starting dockerd (log: /var/log/kerasenv-dockerd.log)"
    setsid nohup dockerd >/var/log/kerasenv-dockerd.log 2>&1 < /dev/null &
  fi
  for _ in $(seq 60); do docker_up && break; sleep 1; done
  docker_up || { tail -20 /var/log/kerasenv-dockerd.log 2>/dev/null >&2; fail "dockerd did not start"; }
fi

# The unprivileged user whose rootless Podman the tests drive (a real rootless engine): with a
# subuid/subgid range, which useradd gives a new user on Debian.
if is_root && ! id kerasenv-rootless >/dev/null 2>&1; then
  me "useradd kerasenv-rootless (rootless Podman in the tests)"
  useradd --create-home --shell /usr/sbin/nologin kerasenv-rootless
fi

# --- 2. per-user: the tooling venv and Docker Compose v2 as a CLI plugin (no root needed) ---
as_invoker make --no-print-directory venv compose-plugin PYTHON="$PYTHON" | { grep -v 'Nothing to be done' || true; }

# --- 3. arm64 programs on an amd64 machine, for the matrix's arm64 images (issue 36): qemu >= 10
# and its binfmt_misc entry (scripts/arm64-emulation.sh says why that qemu) ----------------------
has_arm64=$(grep -c '^\[variant\.arm64\]' images/matrix.toml || true)
if [ "$has_arm64" -gt 0 ] && [ "$(uname -m)" = x86_64 ]; then
  if is_root; then
    bash scripts/arm64-emulation.sh --quiet
  else
    bash scripts/arm64-emulation.sh --check >/dev/null || bash scripts/arm64-emulation.sh --check
  fi
fi

# --- 4. a single-node Slurm (issue 37): munged, slurmctld and slurmd running, one node of this
# machine's CPUs, for tests/integration/test_slurm.py (scripts/slurm-local.sh says why each piece) -
if is_root; then
  bash scripts/slurm-local.sh --quiet
else
  bash scripts/slurm-local.sh --check >/dev/null || bash scripts/slurm-local.sh --check
fi

# --- 4b. a Debian sid root with Podman 5 (issue 43): sid's podman needs glibc >= 2.38, bookworm has
# 2.36; tests/integration/test_podman5.py runs it there (scripts/sid-root.sh says how; 75-105 s
# and 360 MB the first time, then it only looks) --------------------------------------------------
# Made beside the base images below (each debootstrap waits on Debian's archive and dpkg more than
# on a core: one after the other they took 37 + 27 + 26 + 79 s of the cold run of 10f36c1);
# waited for at the end of this script.
sid_root_pid=""
if is_root; then
  bash scripts/sid-root.sh --quiet &
  sid_root_pid=$!
else
  bash scripts/sid-root.sh --check >/dev/null || bash scripts/sid-root.sh --check
fi

# --- 5. the base images: every debian:* base_image of the matrix (BASE_IMAGE=: that one only),
# pulled, or made from Debian's archive where no registry answers. Each one made offline, and the
# arm64 bases, are made side by side (a debootstrap waits on the archive and dpkg); the arm64 bases
# only take their own -arm64 tag for good, so the amd64 loop may look at a tag in between.
# The arm64 bases of the arm64 images, debian:<suite>-slim-arm64 (the local tag: Docker 20.10 keeps
# one image per tag): pulled for linux/arm64, or made with debootstrap under qemu (about 3 minutes).
arm64_bases() {
  local arm_bases base local_tag suite
  arm_bases=$(.venv/bin/python - <<'PY'
from kerasenv.matrix import schema
print(" ".join(sorted({v.base_image for v in schema.load().variants if v.arm64})))
PY
)
  for base in $arm_bases; do
    local_tag="$base-arm64"
    docker image inspect "$local_tag" >/dev/null 2>&1 && continue
    if timeout 120 docker pull -q --platform linux/arm64 "$base" >/dev/null 2>&1 \
       && [ "$(docker image inspect -f '{{.Architecture}}' "$base")" = arm64 ]; then
      docker tag "$base" "$local_tag"
      docker pull -q --platform linux/amd64 "$base" >/dev/null  # the tag stays the amd64 one
      continue
    fi
    suite=$(sed -n 's/^debian:\([a-z]*\)\(-slim\)\{0,1\}$/\1/p' <<<"$base")
    is_root || fail "cannot pull $base for linux/arm64: run \`sudo make base-offline PLATFORM=linux/arm64\`"
    me "no registry reachable: making $local_tag offline (debootstrap under qemu)"
    .venv/bin/kerasenv base-offline --suite "$suite" --platform linux/arm64
  done
}
arm64_pid=""
if [ "$has_arm64" -gt 0 ] && [ -z "${BASE_IMAGE:-}" ]; then
  arm64_bases &
  arm64_pid=$!
fi
bases=${BASE_IMAGE:-$(sed -n 's/^base_image = "\(debian:[^"]*\)"/\1/p' images/matrix.toml | sort -u)}
made=()
for base in $bases; do
  if docker image inspect "$base" >/dev/null 2>&1 || timeout 120 docker pull -q "$base" >/dev/null 2>&1; then
    continue
  fi
  # `kerasenv base-offline` makes Debian's own images, debian:<suite>-slim or debian:<suite>.
  suite=$(sed -n 's/^debian:\([a-z]*\)\(-slim\)\{0,1\}$/\1/p' <<<"$base")
  [ -n "$suite" ] || fail "cannot pull the base image $base, and \`kerasenv base-offline\` makes only debian:<suite>[-slim]: pull it by hand${BASE_IMAGE:+ or leave BASE_IMAGE unset}"
  is_root || fail "cannot pull $base (no registry reachable?): run \`sudo make base-offline\` (debootstrap, ~40 s a suite)"
  me "no registry reachable: making $base offline"
  .venv/bin/kerasenv base-offline --suite "$suite" --tag "$base" &
  made+=("$!:$base")
done
for job in "${made[@]}"; do
  wait "${job%%:*}" || fail "making ${job#*:} offline failed (its error is above): \`sudo make base-offline\` makes it alone"
done

# --- 6. the floor daemon's base (KERASENV_MAIN_ENGINE=docker28): the default CPU image's base,
# copied from the main engine (`make test-floor` builds that one image on Docker 20.10) --------
if [ -S "$FLOOR_SOCKET" ] && [ "$MAIN_ENGINE" = docker28 ] && [ -z "${BASE_IMAGE:-}" ]; then
  floor_base=$(.venv/bin/python -c 'from kerasenv.matrix import schema; m = schema.load(); print(m.get(m.default_cpu).base_image)')
  if ! docker -H "unix://$FLOOR_SOCKET" image inspect "$floor_base" >/dev/null 2>&1; then
    me "copying $floor_base to the floor daemon ($FLOOR_SOCKET)"
    docker save "$floor_base" | docker -H "unix://$FLOOR_SOCKET" load -q >/dev/null
  fi
fi

# --- 7. what was made side by side above ---------------------------------------------------------
if [ -n "$arm64_pid" ]; then
  wait "$arm64_pid" || fail "the arm64 base image failed (its error is above): \`sudo make base-offline PLATFORM=linux/arm64\` makes it alone"
fi
if [ -n "$sid_root_pid" ]; then
  wait "$sid_root_pid" || fail "the Debian sid root failed (its error is above): \`sudo scripts/sid-root.sh\` makes it alone"
fi
