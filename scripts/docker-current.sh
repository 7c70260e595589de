#!/usr/bin/env bash
# Docker 28.5.2 with the containerd image store: the engine users run today (issue 43), installed
# from Debian forky's packages into /opt/kerasenv/docker-28.5.2 and started, next to or instead of
# Debian 12's docker.io 20.10 (the declared floor). scripts/test-prereqs.sh calls it; it is also
# what a developer runs by hand to get a second daemon to test against.
#
#   scripts/docker-current.sh install          download and unpack (idempotent; no apt install)
#   scripts/docker-current.sh main             Docker 28 as THE engine, /var/run/docker.sock
#   scripts/docker-current.sh second           Docker 28 as a second daemon, /run/kerasenv-docker28.sock
#   scripts/docker-current.sh floor            Debian 12's dockerd 20.10 as a second daemon,
#                                              /run/kerasenv-docker20.sock (CI's floor lane)
#   scripts/docker-current.sh which [SOCKET]   one line: which engine and image store answers there
#   scripts/docker-current.sh stop-second|stop-floor
#
# Why each piece:
# - forky's docker.io 28.5.2, containerd 2.1.9 and docker-buildx 0.29.1 are built against glibc
#   <= 2.34 and run on bookworm (2.36); forky's runc needs glibc 2.38, so the host's runc
#   (bookworm's runc package, docker.io's dependency) stays the runtime.
# - The packages are fetched with `apt-get download` through a private apt configuration
#   (/var/cache/kerasenv-forky): the system's sources never name forky, so no `apt-get upgrade`
#   can pull anything from it, and nothing is installed with dpkg: `dpkg-deb -x` only unpacks.
# - `features.containerd-snapshotter: true`: the image store Docker 29 gives fresh installs
#   (image Id = manifest digest, compressed Size on 29.0-29.7: moby#53398, moby#53426).
# - A second daemon has its own data root, exec root (its managed containerd lives there), socket,
#   pid file and a bridge made here with `--iptables=false` and our own NAT rule, so it never
#   touches the main daemon's docker0 or chains. Never `--bridge none`: that made dockerd delete
#   the main engine's docker0.
# When everything is up it only looks (a few stat calls and one `docker version`: well under 2 s).
set -euo pipefail

VERSION=28.5.2
PREFIX=${KERASENV_DOCKER28_PREFIX:-/opt/kerasenv/docker-$VERSION}
CACHE=/var/cache/kerasenv-forky
PACKAGES=(docker.io docker-cli containerd docker-buildx)
me() { printf 'docker-current: %s\n' "$*"; }
fail() { printf 'docker-current: %s\n' "$*" >&2; exit 1; }

# --- where each daemon lives --------------------------------------------------------------------
# name  socket                          data root                      exec root                   bridge   subnet
declare -A SOCK=([main]=/var/run/docker.sock [second]=/run/kerasenv-docker28.sock [floor]=/run/kerasenv-docker20.sock)
declare -A DATA=([main]=/var/lib/docker [second]=/var/lib/kerasenv-docker28 [floor]=/var/lib/kerasenv-docker20)
declare -A EXEC=([main]=/var/run/docker [second]=/run/kerasenv-docker28 [floor]=/run/kerasenv-docker20)
declare -A PIDF=([main]=/var/run/docker.pid [second]=/run/kerasenv-docker28.pid [floor]=/run/kerasenv-docker20.pid)
declare -A BRIDGE=([second]=kd28br0 [floor]=kd20br0)
declare -A NET=([second]=172.31.28 [floor]=172.31.20)
declare -A LOG=([main]=/var/log/kerasenv-dockerd.log [second]=/var/log/kerasenv-docker28.log [floor]=/var/log/kerasenv-docker20.log)

docker28() { "$PREFIX/usr/bin/docker" "$@"; }

# "28.5.2 containerd" / "20.10.24+dfsg1 overlay2" of the daemon on SOCKET, or nothing.
engine_at() {
  local sock=$1 out
  [ -S "$sock" ] || return 0
  out=$(timeout 10 "$(docker_cli)" -H "unix://$sock" info --format \
    '{{.ServerVersion}} {{.Driver}}{{range .DriverStatus}}{{if eq (index . 0) "driver-type"}} {{index . 1}}{{end}}{{end}}' 2>/dev/null) || return 0
  # The containerd store reports Driver "overlayfs" and DriverStatus driver-type
  # io.containerd.snapshotter.v1; a graph driver ("overlay2") has no driver-type row.
  case "$out" in
    *io.containerd.snapshotter.v1*) echo "${out%% *} containerd" ;;
    *) echo "$out" ;;
  esac
}
docker_cli() { if [ -x "$PREFIX/usr/bin/docker" ]; then echo "$PREFIX/usr/bin/docker"; else command -v docker; fi; }

installed() { [ -x "$PREFIX/usr/sbin/dockerd" ] && [ -x "$PREFIX/usr/bin/containerd" ] && [ -f "$PREFIX/.installed" ]; }

install() {
  installed && return 0
  [ "$(id -u)" -eq 0 ] || fail "installing Docker $VERSION needs root: run \`sudo $0 install\`"
  [ "$(dpkg --print-architecture)" = amd64 ] || fail "only amd64 is set up here (forky's amd64 packages)"
  local apt_opts=(-o "Dir::Etc::sourcelist=$CACHE/sources.list" -o Dir::Etc::sourceparts=-
                  -o "Dir::State::Lists=$CACHE/lists" -o "Dir::Cache=$CACHE")
  mkdir -p "$CACHE/lists/partial" "$CACHE/archives/partial" "$CACHE/debs"
  echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian forky main' \
    > "$CACHE/sources.list"
  me "fetching forky's ${PACKAGES[*]} into $CACHE (private apt lists: the system's sources stay as they are)"
  apt-get -qq "${apt_opts[@]}" update
  # The versions this project tested; forky moves on, and a newer one is a new row in
  # docs/using/engines.md, not a silent upgrade.
  local want=(docker.io=28.5.2+dfsg4-5 docker-cli=28.5.2+dfsg4-5 containerd=2.1.9+ds1-5 docker-buildx=0.29.1+ds1-4)
  ( cd "$CACHE/debs" && rm -f ./*.deb && chown _apt "$CACHE/debs" 2>/dev/null || true
    if ! apt-get -qq "${apt_opts[@]}" download "${want[@]}" 2>/dev/null; then
      me "forky no longer has ${want[*]}; taking its current ${PACKAGES[*]}"
      apt-get -qq "${apt_opts[@]}" download "${PACKAGES[@]}"
    fi )
  rm -rf "$PREFIX.new" && mkdir -p "$PREFIX.new"
  for deb in "$CACHE"/debs/*.deb; do dpkg-deb -x "$deb" "$PREFIX.new"; done
  "$PREFIX.new/usr/sbin/dockerd" --version >/dev/null \
    || fail "forky's dockerd does not run on this host (glibc $(ldd --version | sed -n '1s/.* //p')): see $0's header"
  rm -rf "$PREFIX" && mv "$PREFIX.new" "$PREFIX"
  touch "$PREFIX/.installed"
  me "installed $("$PREFIX/usr/sbin/dockerd" --version) in $PREFIX"
}

runc_path() {
  local r
  for r in /usr/sbin/runc /usr/bin/runc; do [ -x "$r" ] && { dirname "$r"; return; }; done
  fail "no runc on this host: run \`apt-get install runc\` (bookworm's; forky's needs glibc 2.38)"
}

make_bridge() {  # ROLE: a bridge and NAT of our own, so the daemon runs with --iptables=false
  local role=$1 br=${BRIDGE[$1]} net=${NET[$1]}
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add "$br" type bridge
    ip addr add "$net.1/24" dev "$br"
  fi
  ip link set "$br" up
  sysctl -qw net.ipv4.ip_forward=1
  iptables -t nat -C POSTROUTING -s "$net.0/24" ! -o "$br" -j MASQUERADE 2>/dev/null \
    || iptables -t nat -A POSTROUTING -s "$net.0/24" ! -o "$br" -j MASQUERADE
  # FORWARD's policy is DROP where a Docker runs: let our bridge out and its answers back in.
  iptables -C FORWARD -i "$br" -j ACCEPT 2>/dev/null || iptables -I FORWARD -i "$br" -j ACCEPT
  iptables -C FORWARD -o "$br" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT 2>/dev/null \
    || iptables -I FORWARD -o "$br" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
  : "$role"
}

drop_stale_pid() {  # FILE NAME: remove FILE unless its pid is a running NAME process
  local file=$1 name=$2 pid
  [ -f "$file" ] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]; then return 0; fi
  rm -f "$file"
}

start() {  # ROLE
  local role=$1 sock=${SOCK[$1]} dockerd bin_path config args=()
  [ "$(id -u)" -eq 0 ] || fail "starting a Docker daemon needs root: run \`sudo $0 $role\`"
  if [ "$role" = floor ]; then
    dockerd=$(command -v dockerd || echo /usr/sbin/dockerd)
    [ -x "$dockerd" ] || fail "no dockerd 20.10 for the floor lane: run \`apt-get install docker.io\` (Debian 12's)"
    bin_path=$PATH
    config=$CACHE/daemon-floor.json
    echo '{}' > "$config"
  else
    install
    dockerd=$PREFIX/usr/sbin/dockerd
    # The extracted containerd and shim first; runc and docker-init (tini) from the host.
    bin_path=$PREFIX/usr/bin:$PREFIX/usr/sbin:$PREFIX/usr/libexec/docker:$(runc_path):$PATH
    config=$PREFIX/daemon.json
    # cdi is on by default from 28.2 (moby#49963): written out so the doctor's fixture says why.
    echo '{"features": {"containerd-snapshotter": true, "cdi": true}}' > "$config"
  fi
  args=(--config-file "$config" -H "unix://$sock" --data-root "${DATA[$role]}" --exec-root "${EXEC[$role]}"
        --pidfile "${PIDF[$role]}")
  if [ "$role" != main ]; then
    make_bridge "$role"
    args+=(--bridge "${BRIDGE[$role]}" --iptables=false --ip-masq=false)
  fi
  drop_stale_pid "${PIDF[$role]}" dockerd
  drop_stale_pid "${EXEC[$role]}/containerd/containerd.pid" containerd
  mkdir -p "${DATA[$role]}" "${EXEC[$role]}"
  me "starting $("$dockerd" --version | sed 's/, build.*//') on $sock (log: ${LOG[$role]})"
  # Its own session: a Ctrl-C to `make test` does not stop the daemon under the tests.
  PATH=$bin_path setsid nohup "$dockerd" "${args[@]}" >>"${LOG[$role]}" 2>&1 </dev/null &
  for _ in $(seq 60); do [ -n "$(engine_at "$sock")" ] && break; sleep 1; done
  [ -n "$(engine_at "$sock")" ] || { tail -20 "${LOG[$role]}" >&2; fail "dockerd did not answer on $sock within 60 s"; }
  if [ "$role" = main ]; then
    # The CLI and buildx plugin of the same release, where `docker` is looked up first.
    ln -sf "$PREFIX/usr/bin/docker" /usr/local/bin/docker
    mkdir -p /usr/local/lib/docker/cli-plugins
    ln -sf "$PREFIX/usr/libexec/docker/cli-plugins/docker-buildx" /usr/local/lib/docker/cli-plugins/docker-buildx
  fi
}

ensure() {  # ROLE: started unless it answers with the engine wanted
  local role=$1 sock=${SOCK[$1]} now
  now=$(engine_at "$sock")
  case "$role:$now" in
    main:"$VERSION"*" containerd"|second:"$VERSION"*" containerd"|floor:20.10.*) return 0 ;;
    *:) start "$role" ;;
    *) fail "$sock answers with Docker $now, not the one wanted here ($([ "$role" = floor ] && echo 20.10 || echo "$VERSION containerd")): stop it or use another socket" ;;
  esac
}

stop() {  # ROLE (second daemons only: the main one belongs to whoever started it)
  local role=$1 pid
  pid=$(cat "${PIDF[$role]}" 2>/dev/null || true)
  if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
    kill "$pid"
    for _ in $(seq 30); do [ -d "/proc/$pid" ] || break; sleep 1; done
  fi
}

case "${1:-}" in
  install) install ;;
  main|second|floor) ensure "$1" ;;
  which) s=${2:-/var/run/docker.sock}; e=$(engine_at "$s"); echo "${e:-nothing answers on $s}" ;;
  stop-second) stop second ;;
  stop-floor) stop floor ;;
  *) fail "usage: $0 install|main|second|floor|which [SOCKET]|stop-second|stop-floor" ;;
esac
