#!/usr/bin/env bash
# A throw-away single-node Slurm cluster for tests (Debian 12, Slurm 22.05 + munge), as root and
# without systemd (docs/cluster.md).
#
#   scripts/slurm-test-cluster.sh up       install slurm-wlm + munge if missing, start the daemons
#   scripts/slurm-test-cluster.sh down     cancel all jobs, stop the daemons this script started
#   scripts/slurm-test-cluster.sh status   sinfo + squeue
#
# The configuration goes to Slurm's default path, /etc/slurm/slurm.conf (marked as this script's;
# `down` removes it, and `up` refuses to replace one it did not write): snakemake-executor-plugin-
# slurm-jobstep drops SLURM_CONF from the environment of the srun inside each job, so a
# configuration elsewhere would not be found there.
# No accounting (no slurmdbd): profiles/slurm queries job states with squeue, which needs
# MinJobAge >= 3 x slurm-init-seconds-before-status-checks (set to 300 here).
#
# Environment:
#   SLURM_TEST_DIR         state, spool, logs and PID files (default /tmp/rankstudy-slurm)
#   SLURM_TEST_PARTITIONS  partitions over the one node, the first is the default
#                          (default "cpu gpu": the placeholder names profiles/slurm uses)
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
DIR=${SLURM_TEST_DIR:-/tmp/rankstudy-slurm}
PARTITIONS=${SLURM_TEST_PARTITIONS:-cpu gpu}
CONF=/etc/slurm/slurm.conf
MARK="# Written by scripts/slurm-test-cluster.sh"
unset SLURM_CONF
PACKAGES="slurm-wlm slurmctld slurmd slurm-client munge"

die() { echo "slurm-test-cluster: $*" >&2; exit 1; }

alive() {  # alive NAME: the daemon whose PID this script recorded is running
  [ -s "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null
}

stop_pid() {  # stop_pid NAME: TERM, then KILL after 10 s, the PID recorded in $DIR/NAME.pid
  local file=$DIR/$1.pid pid
  [ -s "$file" ] || return 0
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "slurm-test-cluster: $1 ($pid) ignored SIGTERM; killing it" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$file"
}

install_packages() {
  local missing=0 binary
  for binary in slurmctld slurmd sbatch squeue munged; do
    command -v "$binary" >/dev/null || missing=1
  done
  [ "$missing" = 0 ] && return 0
  command -v apt-get >/dev/null || die "Slurm is not installed and apt-get is not available"
  # No service may start from the packages' postinst scripts (there is no systemd either):
  # a policy-rc.d that refuses them, unless the machine already has one.
  local guard=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    guard=/usr/sbin/policy-rc.d
  fi
  local status=0
  echo "slurm-test-cluster: installing $PACKAGES"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES >"$DIR/log/apt.log" 2>&1 || {
    DEBIAN_FRONTEND=noninteractive apt-get update -q >>"$DIR/log/apt.log" 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $PACKAGES >>"$DIR/log/apt.log" 2>&1
  } || status=$?
  [ -n "$guard" ] && rm -f "$guard"
  [ "$status" = 0 ] || { tail -n 20 "$DIR/log/apt.log" >&2; die "apt-get install failed (log: $DIR/log/apt.log)"; }
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    echo "slurm-test-cluster: reusing the running munged"
    return 0
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    /usr/sbin/mungekey --create --force
    chown munge:munge /etc/munge/munge.key
  fi
  install -d -o munge -g munge -m 0755 /run/munge
  rm -f /run/munge/munged.pid
  runuser -u munge -- /usr/sbin/munged        # daemonises; PID in /run/munge/munged.pid
  for _ in $(seq 40); do [ -s /run/munge/munged.pid ] && break; sleep 0.25; done
  cp /run/munge/munged.pid "$DIR/munged.pid"
  munge -n | unmunge >/dev/null
}

write_conf() {
  local node_line mem_mb partition default=YES
  # one node called "localhost", whatever the machine's hostname; 90% of its memory
  node_line=$(slurmd -C | head -n1 | sed -e 's/^NodeName=[^ ]*/NodeName=localhost/' -e 's/ RealMemory=[0-9]*//')
  mem_mb=$(awk '/^MemTotal:/{print int($2 / 1024 * 0.9)}' /proc/meminfo)
  mkdir -p "$(dirname "$CONF")"
  cat > "$CONF" <<EOF
$MARK
# A single-node test cluster, no accounting; state, logs and PID files in $DIR.
ClusterName=rankstudy-test
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
SchedulerType=sched/backfill
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# finished jobs stay visible to squeue for 5 min (squeue status needs >= 3 x init-seconds)
MinJobAge=300
InactiveLimit=0
KillWait=5
Waittime=0
$node_line RealMemory=$mem_mb State=UNKNOWN
EOF
  for partition in $PARTITIONS; do
    echo "PartitionName=$partition Nodes=ALL Default=$default MaxTime=INFINITE State=UP" >> "$CONF"
    default=NO
  done
}

up() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  if alive slurmctld && alive slurmd; then
    echo "slurm-test-cluster: already up"; return 0
  fi
  if [ -e "$CONF" ] && ! grep -qxF "$MARK" "$CONF"; then
    die "$CONF exists and was not written by this script: not replacing a real configuration"
  fi
  down_daemons
  rm -rf "$DIR/state" "$DIR/spool"
  mkdir -p "$DIR/state" "$DIR/spool" "$DIR/log"
  # whatever fails from here on, stop what was started
  trap 'echo "slurm-test-cluster: up failed; stopping the daemons it started" >&2; down_daemons' EXIT
  install_packages
  start_munge
  write_conf
  slurmctld -f "$CONF"                        # daemonises; PID in $DIR/slurmctld.pid
  slurmd -f "$CONF" -N localhost              # daemonises; PID in $DIR/slurmd.pid
  local state="" deadline=$((SECONDS + 60))
  while [ "$SECONDS" -lt "$deadline" ]; do
    state=$(timeout 5 sinfo -h -o %T 2>/dev/null | sort -u | head -n1) || true
    [ "$state" = idle ] && break
    sleep 0.5
  done
  if [ "$state" != idle ] || ! timeout 30 srun -N1 true; then
    tail -n 20 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "the cluster did not come up (node state: ${state:-none}); logs in $DIR/log"
  fi
  trap - EXIT
  sinfo
  echo "slurm-test-cluster: up; PIDs in $DIR/*.pid"
}

down_daemons() {
  if alive slurmctld && [ -f "$CONF" ]; then
    # jobs first, so that no slurmstepd outlives slurmd
    timeout 10 scancel --full --quiet $(timeout 10 squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    for _ in $(seq 40); do [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.25; done
  fi
  stop_pid slurmd
  stop_pid slurmctld
  stop_pid munged                             # only if this script started it
}

down() {
  [ "$(id -u)" = 0 ] || die "must run as root"
  down_daemons
  rm -rf "$DIR/state" "$DIR/spool"            # logs stay in $DIR/log
  if [ -f "$CONF" ] && grep -qxF "$MARK" "$CONF"; then rm -f "$CONF"; fi
  echo "slurm-test-cluster: down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) sinfo; squeue ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
