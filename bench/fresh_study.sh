#!/usr/bin/env bash
# The timed end-to-end run behind README's "How long it takes": a fresh clone of this repository's HEAD,
# `make env`, then `make study` timed (and `make study-extended` after it with --extended), Snakemake's own
# CPU sampled every minute. Afterwards: python bench/study_time.py --benchmarks DIR/benchmarks --log LOG.
#
#   bash bench/fresh_study.sh [--extended] [DIR]        (DIR default: /tmp/rankstudy-fresh)
#
# Run nothing else meanwhile. `nice` does not keep other work out of the way: with Linux's autogroup
# scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1) every terminal session gets an equal share
# of the CPU whatever its processes' nice values, so tests started from another shell at `nice 19` took
# half the cores and slowed the study's training jobs 1.5-1.7x (bench/results/study_time.md). Lower a
# session's share with `echo 19 > /proc/self/autogroup` in that session instead.
set -euo pipefail
extended=false
if [[ "${1:-}" == "--extended" ]]; then extended=true; shift; fi
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-/tmp/rankstudy-fresh}"
rm -rf "$dir" && git clone -q "$repo" "$dir" && cd "$dir"
report="$dir/fresh_study.txt"
start=$(date +%s)
echo "start $(date -u) commit $(git rev-parse --short HEAD) on $(nproc) CPUs" > "$report"
make env > env.log 2>&1
env_done=$(date +%s)
echo "make env: $((env_done - start)) s" >> "$report"
# The end time is taken when make exits, not after the sampling loop's next wake-up (up to 60 s later:
# the runs before 2026-12-05's second timing were over-counted by that much).
(status=0; make study > study.log 2>&1 || status=$?; echo "$status $(date +%s)" > study_end) &
make_pid=$!
sleep 5
snakemake_pid=$(pgrep -f "snakemake --cores all" | head -1)
while kill -0 "$make_pid" 2>/dev/null; do  # epoch, Snakemake's elapsed and CPU seconds, load average
  echo "$(date +%s) $(ps -o etimes=,cputimes= -p "$snakemake_pid") $(cut -d' ' -f1 /proc/loadavg)" >> snakemake_cpu.log
  for _ in $(seq 60); do kill -0 "$make_pid" 2>/dev/null || break; sleep 1; done
done
wait "$make_pid" || true
read -r status study_done < study_end
echo "make study: exit $status, $((study_done - env_done)) s" >> "$report"
if $extended; then
  status=0; make study-extended > study-extended.log 2>&1 || status=$?
  echo "make study-extended (after make study): exit $status, $(( $(date +%s) - study_done )) s" >> "$report"
fi
cat "$report"
