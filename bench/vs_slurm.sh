#!/usr/bin/env bash
# Short jobs, gpool against Slurm, measured in one run on this machine (issue 24; the figures
# are in docs/performance.md). Never run by CI.
#
#   bench/vs_slurm.sh [--slurm] [--build DIR] [--jobs N] [--starts N] [--submits N]
#                     [--array N] [--rounds N]
#
#   --slurm      also measure Slurm (Debian's slurm-wlm and munge, installed with apt-get when
#                missing; one slurmctld and one slurmd on this machine, 8 GPUs as gres, the
#                default scheduler); without it only gpool is measured
#   --build DIR  the gpool build to measure (default build/release, else build/ci-release)
#   --jobs N     short jobs for the throughput row (default 200)
#   --starts N   single jobs on an idle pool for the start-latency row (default 20)
#   --submits N  serial CLI submissions (default 100)
#   --array N    also submit an array of N elements in one call and drain it (gpool only;
#                default 0: no)
#   --rounds N   measure everything N times, alternating gpool and Slurm (default 1)
#
# Both systems get one server of 8 GPUs (gpool: `gpool up --servers 1`, 8 simulated A100s, the
# same code paths as real GPUs from the controller to the supervisor; Slurm: 8 gres GPUs). Every
# job is a one-GPU job that writes the time it started (`date +%s.%N`) and does nothing else,
# so all times are read from the same clock: the client's before its submit and the job's own.
#   start latency   one job at a time on an idle pool: submit call to the job's first
#                   instruction, p50 and max
#   throughput      N jobs submitted in one call (an array for both): the submit call to the
#                   last job's start, in jobs/s
#   submissions     N `gpool submit` / `sbatch` calls one after another: calls/s
# Needs root (users, Slurm's daemons). Prints one table, with the ratios gpool/Slurm, and the
# load average before and after (the figures are timings on a shared machine).
set -euo pipefail
cd "$(dirname "$0")/.."

slurm=0
build=""
jobs=200
starts=20
submits=100
array=0
rounds=1
while [ $# -gt 0 ]; do
  case "$1" in
    --slurm) slurm=1 ;;
    --build) build=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    --starts) starts=$2; shift ;;
    --submits) submits=$2; shift ;;
    --array) array=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "vs_slurm: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$(id -u)" -ne 0 ]; then
  echo "vs_slurm: needs root (a bench user, Slurm's daemons)" >&2
  exit 2
fi
if [ -z "$build" ]; then
  for d in build/release build/ci-release; do
    if [ -x "$d/src/cli/gpool" ]; then build=$d; break; fi
  done
fi
if [ -z "$build" ] || [ ! -x "$build/src/cli/gpool" ]; then
  echo "vs_slurm: no gpool build (cmake --preset release && cmake --build --preset release)" >&2
  exit 2
fi
build=$(cd "$build" && pwd)
GPOOL=$build/src/cli/gpool
USER_NAME=gpool-bench
id "$USER_NAME" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$USER_NAME"

work=$(mktemp -d /tmp/gpool-vs-slurm.XXXXXX)
chmod 755 "$work"
stamps=$work/stamps
mkdir -p "$stamps"
chown "$USER_NAME" "$stamps"
pids=()
cleanup() {
  "$GPOOL" down --dir "$work/pool" --purge >/dev/null 2>&1 || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
as_user() { su "$USER_NAME" -s /bin/bash -c "$1"; }
# wait_stamps N: until N stamp files exist (jobs started and wrote their time), at most 600 s.
wait_stamps() {
  local want=$1 deadline=$((SECONDS + 600))
  while [ "$(find "$stamps" -type f | wc -l)" -lt "$want" ]; do
    if [ $SECONDS -gt $deadline ]; then echo "vs_slurm: only $(find "$stamps" -type f | wc -l) of $want jobs started in 600 s" >&2; return 1; fi
    sleep 0.01
  done
}
# The job every row runs: write the time it starts into its own stamp file.
job_script=$work/job.sh
cat >"$job_script" <<EOF
#!/bin/sh
date +%s.%N > $stamps/\$1
EOF
chmod 755 "$job_script"

# stats FILE: p50 and max of the numbers in FILE (seconds) as "p50 max" in ms.
stats() { sort -g "$1" | awk '{v[NR]=$1} END {printf "%.1f %.1f", v[int((NR+1)/2)]*1000, v[NR]*1000}'; }

declare -A result
measure() {  # measure SYSTEM SUBMIT_ONE_CMD SUBMIT_ARRAY_FN IDLE_FN
  local sys=$1 submit_one=$2 submit_array=$3 idle=$4
  # Start latency on an idle pool.
  : >"$work/lat"
  for i in $(seq 1 "$starts"); do
    rm -f "$stamps"/*
    local t0; t0=$(now)
    as_user "$(printf "$submit_one" "s$i")" >/dev/null
    wait_stamps 1
    echo "$(cat "$stamps/s$i") - $t0" | bc -l >>"$work/lat"
    $idle
  done
  read -r p50 max <<<"$(stats "$work/lat")"
  result[$sys,start_p50]=$p50
  result[$sys,start_max]=$max
  # Throughput of short jobs.
  rm -f "$stamps"/*
  local t0; t0=$(now)
  $submit_array "$jobs"
  wait_stamps "$jobs"
  local last; last=$(cat "$stamps"/* | sort -g | tail -1)
  result[$sys,jobs_s]=$(echo "$jobs / ($last - $t0)" | bc -l | xargs printf '%.1f')
  $idle
  # Serial submissions.
  rm -f "$stamps"/*
  t0=$(now)
  for i in $(seq 1 "$submits"); do as_user "$(printf "$submit_one" "c$i")" >/dev/null; done
  local t1; t1=$(now)
  result[$sys,submits_s]=$(echo "$submits / ($t1 - $t0)" | bc -l | xargs printf '%.1f')
  wait_stamps "$submits"
  $idle
  # Slurm drains arrays at about one element a second with its default scheduler (above): a
  # 10,000-element array would take hours, so the array row is gpool's only.
  if [ "$array" -gt 0 ] && [ "$sys" = gpool ]; then
    rm -f "$stamps"/*
    t0=$(now)
    $submit_array "$array"
    local t_sub; t_sub=$(now)
    wait_stamps "$array"
    last=$(cat "$stamps"/* | sort -g | tail -1)
    result[$sys,array_submit_s]=$(echo "$t_sub - $t0" | bc -l | xargs printf '%.2f')
    result[$sys,array_jobs_s]=$(echo "$array / ($last - $t0)" | bc -l | xargs printf '%.1f')
    $idle
  fi
}

# --- gpool -----------------------------------------------------------------------------------
gpool_up() {
  "$GPOOL" up --dir "$work/pool" --servers 1 >"$work/gpool-up.log" 2>&1 ||
    { cat "$work/gpool-up.log"; exit 1; }
  chmod 755 "$work/pool"
}
gpool_env="GPOOL_SOCKET=$work/pool/gpoold.sock"
gpool_one() { printf "$gpool_env $GPOOL submit --gpus 1 -- $job_script %s" "$1"; }
gpool_array() {
  # The array's elements find their index in GPOOL_ARRAY_TASK_ID (docs/cli.md).
  as_user "$gpool_env $GPOOL submit --gpus 1 --array 0-$(($1 - 1)) -- sh -c '$job_script a\$GPOOL_ARRAY_TASK_ID'" >/dev/null
}
gpool_idle() {  # until nothing of the bench user is pending or running
  local deadline=$((SECONDS + 600))
  while [ -n "$(GPOOL_SOCKET=$work/pool/gpoold.sock "$GPOOL" queue --all --json 2>/dev/null |
                python3 -c 'import json,sys; print("".join(str(j["id"]) for j in json.load(sys.stdin).get("jobs", [])))')" ]; do
    [ $SECONDS -gt $deadline ] && { echo "vs_slurm: gpool did not drain" >&2; return 1; }
    sleep 0.02
  done
}

# --- Slurm -----------------------------------------------------------------------------------
slurm_up() {
  if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "installing slurm-wlm and munge (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null
  fi
  local host; host=$(hostname -s)
  local s=$work/slurm
  mkdir -p "$s/spool" "$s/state" "$s/log" /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 400 /etc/munge/munge.key
  fi
  chown munge:munge /run/munge 2>/dev/null || true
  pgrep -x munged >/dev/null || su munge -s /bin/sh -c munged 2>/dev/null || munged --force
  cat >"$s/slurm.conf" <<EOF
ClusterName=vsbench
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$s/state
SlurmdSpoolDir=$s/spool
SlurmctldPidFile=$s/slurmctld.pid
SlurmdPidFile=$s/slurmd.pid
SlurmctldPort=$((20000 + RANDOM % 20000))
SlurmdPort=$((40000 + RANDOM % 20000))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
SlurmctldLogFile=$s/log/slurmctld.log
SlurmdLogFile=$s/log/slurmd.log
NodeName=$host CPUs=$(nproc) Gres=gpu:8 State=UNKNOWN
PartitionName=bench Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  # GPUs as gres need device files; nothing touches them (task/none, no cgroup constraint).
  echo "NodeName=$host Name=gpu File=/dev/tty[0-7]" >"$s/gres.conf"
  export SLURM_CONF=$s/slurm.conf
  slurmctld -D -f "$s/slurm.conf" >"$s/log/ctld.out" 2>&1 &
  pids+=($!)
  slurmd -D -f "$s/slurm.conf" >"$s/log/d.out" 2>&1 &
  pids+=($!)
  local deadline=$((SECONDS + 60))
  until sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix)'; do
    [ $SECONDS -gt $deadline ] && { echo "vs_slurm: Slurm did not come up:"; for f in "$s"/log/*; do echo "== $f"; tail -n 5 "$f"; done; exit 1; }
    sleep 0.2
  done
}
slurm_one() { printf "SLURM_CONF=$SLURM_CONF sbatch -Q --gres=gpu:1 -n1 -o /dev/null -e /dev/null $job_script %s" "$1"; }
slurm_array() {
  as_user "SLURM_CONF=$SLURM_CONF sbatch -Q --gres=gpu:1 -n1 -o /dev/null -e /dev/null --array=0-$(($1 - 1)) --wrap '$job_script a\$SLURM_ARRAY_TASK_ID'" >/dev/null
}
slurm_idle() {
  local deadline=$((SECONDS + 600))
  while [ -n "$(SLURM_CONF=$SLURM_CONF squeue -h -o %i 2>/dev/null)" ]; do
    [ $SECONDS -gt $deadline ] && { echo "vs_slurm: Slurm did not drain" >&2; return 1; }
    sleep 0.02
  done
}

# measure takes a printf format for one submission; the bash functions above build it.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
gpool_up
[ "$slurm" -eq 1 ] && slurm_up
for r in $(seq 1 "$rounds"); do
  echo "round $r of $rounds: gpool"
  measure gpool "$(gpool_one %s)" gpool_array gpool_idle
  row_gpool="${result[gpool,start_p50]} ${result[gpool,start_max]} ${result[gpool,jobs_s]} ${result[gpool,submits_s]} ${result[gpool,array_submit_s]:-} ${result[gpool,array_jobs_s]:-}"
  echo "  $row_gpool" >>"$work/rows.gpool"
  if [ "$slurm" -eq 1 ]; then
    echo "round $r of $rounds: Slurm"
    measure slurm "$(slurm_one %s)" slurm_array slurm_idle
    echo "  ${result[slurm,start_p50]} ${result[slurm,start_max]} ${result[slurm,jobs_s]} ${result[slurm,submits_s]} ${result[slurm,array_submit_s]:-} ${result[slurm,array_jobs_s]:-}" >>"$work/rows.slurm"
  fi
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo
echo "short jobs on one server of 8 GPUs, $(nproc) CPUs; load average before $load_before, after $load_after"
printf '%-34s %12s %12s %10s\n' "" "gpool" "Slurm" "ratio"
row() {  # row LABEL KEY BETTER(high|low)
  local g=${result[gpool,$2]:-} s=${result[slurm,$2]:-} ratio="-"
  if [ -n "$g" ] && [ -n "$s" ]; then
    if [ "$3" = high ]; then ratio=$(echo "$g / $s" | bc -l | xargs printf '%.1fx'); else ratio=$(echo "$s / $g" | bc -l | xargs printf '%.1fx'); fi
  fi
  printf '%-34s %12s %12s %10s\n' "$1" "${g:--}" "${s:--}" "$ratio"
}
row "start latency p50 (ms)" start_p50 low
row "start latency max (ms)" start_max low
row "$jobs short jobs (jobs/s)" jobs_s high
row "serial submissions (calls/s)" submits_s high
if [ "$array" -gt 0 ]; then
  row "array of $array: submit call (s)" array_submit_s low
  row "array of $array: drained (jobs/s)" array_jobs_s high
fi
echo "(ratio: how many times better gpool is; the last round's figures; every round:"
cat "$work/rows.gpool"
[ -f "$work/rows.slurm" ] && { echo " Slurm:"; cat "$work/rows.slurm"; }
echo ")"
