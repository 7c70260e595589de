#!/usr/bin/env bash
# Usage: scripts/slurm-local.sh [--check | --quiet]
# A real single-machine Slurm cluster on this host (issue 37): Debian's slurmctld, slurmd and
# munge, one node named after `hostname -s` with this machine's CPUs and memory, one partition
# `debug`. slurm/kerasenv-jax.sbatch is submitted to it by tests/integration/test_slurm.py. Safe to
# rerun, also while the daemons run or jobs are running: when all is there it only looks.
# --check: say what is missing (one line, exit 1), change nothing; else one line saying what runs.
# --quiet: print only what it changes (scripts/test-prereqs.sh).
#
# Why each piece (Debian 12 packages Slurm 22.05.8 and MUNGE 0.5.15):
# - munge: Slurm's daemons and commands authenticate every message with MUNGE credentials
#   (AuthType=auth/munge), which need one shared key (/etc/munge/munge.key) and a running munged.
#   The Debian package makes the key on install; it is made here if it is missing all the same.
# - No systemd here (containers, this CI): the daemons are started by hand, in their own session
#   (setsid), so a Ctrl-C to `make test` does not stop them under the tests. Each daemonizes
#   itself and writes its log to /var/log/slurm/ (munged: /var/log/munge/munged.log).
# - slurm.conf is written from `slurmd -C` (this machine's CPUs, sockets, cores, threads and
#   memory, exactly as slurmd will report them at registration: a node configured with more than
#   it reports is drained). It is rewritten, and the daemons restarted, only when it changes.
# - SelectType=select/cons_tres + CR_CPU: each CPU is a consumable resource, so `--ntasks=2
#   --cpus-per-task=1` runs 2 tasks side by side on a 2-CPU machine (select/linear gives whole
#   nodes to jobs; CR_Core would hand out whole cores, two CPUs each on an SMT host).
# - ProctrackType=proctrack/linuxproc and TaskPlugin=task/none: processes tracked through /proc's
#   parent ids, no binding; so neither needs cgroup (v1 or v2) plumbing or systemd delegation.
#   The containers of a job are children of dockerd, not of the task, in any case: the batch
#   script removes them itself (slurm/kerasenv-jax.sbatch).
# - ReturnToService=2: a node that was DOWN (slurmd restarted, the machine rebooted) comes back by
#   itself when its slurmd registers with a valid configuration.
# - A node name that does not resolve breaks slurmctld -> slurmd, srun's I/O and JAX's coordinator
#   (the first node of the step, see docs/using/multi-worker.md): it is added to /etc/hosts
#   (127.0.1.1, as Debian's installer does), which containers on --network host share.
set -euo pipefail
check_only=0 quiet=0 changed=0
[ "${1:-}" = "--check" ] && check_only=1
[ "${1:-}" = "--quiet" ] && quiet=1
me() { printf 'slurm-local: %s\n' "$*"; }
fail() { printf 'slurm-local: %s\n' "$*" >&2; exit 1; }
export PATH="$PATH:/usr/sbin:/sbin"  # slurmd, slurmctld, munged live in /usr/sbin

conf=/etc/slurm/slurm.conf
marker="# Written by kerasenv scripts/slurm-local.sh"
key=/etc/munge/munge.key
logs=/var/log/slurm
node=$(hostname -s)
wait_s=${SLURM_LOCAL_WAIT_S:-60}
fix="run \`sudo bash scripts/slurm-local.sh\` (or \`sudo make slurm-local\`)"

installed() { command -v slurmctld && command -v slurmd && command -v munged && command -v sbatch; } >/dev/null 2>&1
running() { ps -C "$1" -o stat= 2>/dev/null | grep -qv '^Z'; }  # a zombie (reaped later) is not running
munge_ok() { munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q ' is UP'; }
node_state() { timeout 10 sinfo -h -N -n "$node" -o %T 2>/dev/null | sed -n 1p; }
node_ready() { case "$(node_state)" in idle|mixed|allocated|completing) return 0 ;; *) return 1 ;; esac; }
version() { sinfo --version 2>/dev/null | awk '{print $2}'; }

want_conf() {
  # slurmd -C's first line: NodeName=... CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2
  # ThreadsPerCore=1 RealMemory=...; the node is named `hostname -s` whatever slurmd calls it.
  local hw
  hw=$(slurmd -C 2>/dev/null | sed -n '1s/^NodeName=[^ ]* //p')
  [ -n "$hw" ] || fail "\`slurmd -C\` printed no node line: run it by hand to see why"
  cat <<EOF
$marker: one node, this machine ($node), for the
# tests and examples of slurm/kerasenv-jax.sbatch. Rewritten by that script when the hardware
# changes; a slurm.conf without this first line is never touched.
ClusterName=kerasenv
SlurmctldHost=$node
AuthType=auth/munge
CredType=cred/munge
SlurmUser=slurm
SlurmdUser=root
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=$logs/slurmctld.log
SlurmdLogFile=$logs/slurmd.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=$node $hw State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

# --- --check: look only -------------------------------------------------------------------------
if [ "$check_only" -eq 1 ]; then
  installed || fail "Slurm is not installed (slurmctld, slurmd, munge): $fix"
  munge_ok || fail "munged is not running (MUNGE authenticates Slurm's messages): $fix"
  [ -f "$conf" ] || fail "$conf is missing: $fix"
  head -1 "$conf" | grep -qF "$marker" || fail "$conf is not this project's single-node one (kept as it is): use that cluster, or move it away and $fix"
  [ "$(want_conf)" = "$(cat "$conf")" ] || fail "$conf does not match this machine (\`slurmd -C\`): $fix"
  ctld_up || fail "slurmctld is not answering (log: $logs/slurmctld.log): $fix"
  # slurmctld takes a dead slurmd for idle until SlurmdTimeout (300 s): look at the process too.
  running slurmd || fail "slurmd is not running (log: $logs/slurmd.log): $fix"
  node_ready || fail "node $node is $(node_state || echo unknown), not idle (log: $logs/slurmd.log): $fix"
  me "Slurm $(version) on node $node ($(sed -n 's/^NodeName=[^ ]* CPUs=\([0-9]*\).*/\1/p' "$conf") CPUs), partition debug: $(node_state)"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "needs root (apt-get, munged, slurmctld, slurmd): run \`sudo bash scripts/slurm-local.sh\`"

# --- 1. the packages ------------------------------------------------------------------------------
if ! installed; then
  me "apt-get install slurmctld slurmd slurm-client munge"
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
  apt-get update -qq
  # slurm-client: sbatch, srun, sinfo, scontrol (a dependency already; named for clarity).
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
  installed || fail "apt-get installed Slurm, but slurmctld, slurmd, munged or sbatch is still missing"
  changed=1
fi

# --- 2. the node name resolves ---------------------------------------------------------------------
if ! getent hosts "$node" >/dev/null; then
  me "adding 127.0.1.1 $node to /etc/hosts (Slurm and JAX's coordinator address use the node name)"
  printf '127.0.1.1\t%s\n' "$node" >> /etc/hosts
  changed=1
fi

# --- 3. MUNGE: the key, then munged ---------------------------------------------------------------
if ! [ -s "$key" ]; then
  me "creating the MUNGE key $key"
  install -d -o munge -g munge -m 0700 /etc/munge
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile="$key"
  else
    dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
  fi
  changed=1
fi
chown munge:munge "$key" && chmod 0400 "$key"  # munged refuses a key others can read
if ! munge_ok; then
  # munged runs as the munge user, in run, state and log directories of its own.
  install -d -o munge -g munge -m 0755 /run/munge
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  if running munged; then
    fail "munged runs but does not answer \`munge -n | unmunge\` (log: /var/log/munge/munged.log)"
  fi
  me "starting munged (log: /var/log/munge/munged.log)"
  setsid runuser -u munge -- munged </dev/null >/dev/null 2>&1
  for _ in $(seq 20); do munge_ok && break; sleep 0.5; done
  munge_ok || fail "munged did not start: see /var/log/munge/munged.log"
  changed=1
fi

# --- 4. slurm.conf ----------------------------------------------------------------------------------
restart=0
if [ -f "$conf" ] && ! head -1 "$conf" | grep -qF "$marker"; then
  fail "$conf was not written by this script (a real cluster's?): it is kept; move it away to get the single-node one"
fi
want=$(want_conf)
if ! [ -f "$conf" ] || [ "$want" != "$(cat "$conf")" ]; then
  [ -f "$conf" ] && restart=1
  me "writing $conf (node $node: $(slurmd -C | sed -n '1s/^NodeName=[^ ]* //p'))"
  install -d -m 0755 /etc/slurm
  printf '%s\n' "$want" > "$conf.tmp" && mv "$conf.tmp" "$conf"
  changed=1
fi
# /run/slurm: slurmctld runs as SlurmUser and removes its pid file on exit only where that user may
# (a stale /run/slurmctld.pid also makes Debian's prerm of slurmctld call scancel, and fail).
install -d -o slurm -g slurm -m 0755 /var/lib/slurm /var/lib/slurm/slurmctld "$logs" /run/slurm
install -d -m 0755 /var/lib/slurm/slurmd

# A changed configuration (other CPUs or memory) needs both daemons restarted: `scontrol
# reconfigure` does not take a node's new hardware.
if [ "$restart" -eq 1 ] && { running slurmctld || running slurmd; }; then
  me "restarting slurmctld and slurmd for the new $conf"
  timeout 10 scontrol shutdown >/dev/null 2>&1 || true
  for _ in $(seq 30); do running slurmctld || running slurmd || break; sleep 1; done
  ! running slurmctld && ! running slurmd || fail "slurmctld or slurmd did not stop after \`scontrol shutdown\`: stop them (pids in /run/slurm/), then rerun"
fi

# --- 5. the daemons -------------------------------------------------------------------------------
if ! running slurmctld; then
  me "starting slurmctld (log: $logs/slurmctld.log)"
  setsid slurmctld </dev/null >/dev/null 2>&1 || fail "slurmctld did not start: see $logs/slurmctld.log"
  changed=1
fi
for _ in $(seq 30); do ctld_up && break; sleep 1; done
ctld_up || fail "slurmctld is not answering after 30 s: see $logs/slurmctld.log"
if ! running slurmd; then
  me "starting slurmd (log: $logs/slurmd.log)"
  setsid slurmd </dev/null >/dev/null 2>&1 || fail "slurmd did not start: see $logs/slurmd.log"
  changed=1
fi

# --- 6. the node up -----------------------------------------------------------------------------------
resumed=0
deadline=$((SECONDS + wait_s))
until node_ready; do
  state=$(node_state || true)
  # Drained (by hand, or after a task Slurm could not kill) while its slurmd answers: this
  # single-user test node goes back to service. A DOWN node returns by itself (ReturnToService=2).
  if [ "$resumed" -eq 0 ] && [[ "$state" == drain* ]]; then
    me "node $node is $state ($(sinfo -h -N -n "$node" -o %E)): resuming it"
    scontrol update NodeName="$node" State=RESUME
    resumed=1 changed=1
  fi
  [ "$SECONDS" -lt "$deadline" ] || fail "node $node is ${state:-unknown}, not idle, after ${wait_s} s: see $logs/slurmd.log and $logs/slurmctld.log"
  sleep 1
done
[ "$quiet" -eq 1 ] && [ "$changed" -eq 0 ] && exit 0
me "Slurm $(version) on node $node ($(sed -n 's/^NodeName=[^ ]* CPUs=\([0-9]*\).*/\1/p' "$conf") CPUs), partition debug: $(node_state)"
