#!/bin/sh
# Trains the three GRU models, one thread each, with at most two of them
# running at a time: every minute the run that has logged the most steps
# (ties: the first of concat, additive, general) is paused (SIGSTOP) and the
# other two run, so the three advance together and get the same number of
# steps. Pausing does not change what a run computes (fixed seeds, one
# thread). STEPS is each run's --max-steps; MINUTES is a wall-clock cap per
# process (paused time included; runs stopped by it log their step count).
# Each run is its own session (setsid): Linux's scheduler autogroups share
# the CPU per session.
# Usage: training/run_gru.sh [STEPS] [MINUTES]
S=${1:-2600}
M=${2:-47}
D=$(dirname "$0")
if [ -z "$GRU_PIDS" ]; then
  for r in concat additive general; do
    setsid /usr/bin/python3 "$D/train.py" --model $r --max-steps "$S" --minutes "$M" > "$D/logs/$r.log" 2>&1 &
    GRU_PIDS="$GRU_PIDS $!"
  done
fi
alive() { n=0; for p in $GRU_PIDS; do kill -0 $p 2>/dev/null && n=$((n + 1)); done; echo $n; }
steps() { sed -n 's/.*\] step \([0-9]*\) .*/\1/p' "$D/logs/$1.log" | tail -n 1; }
while [ "$(alive)" -gt 0 ]; do
  lead="" best=-1
  if [ "$(alive)" -ge 3 ]; then
    for r in concat additive general; do
      n=$(steps $r); n=${n:-0}
      if [ "$n" -gt "$best" ]; then best=$n lead=$r; fi
    done
  fi
  set -- concat additive general
  for p in $GRU_PIDS; do
    if [ "$1" = "$lead" ]; then kill -STOP $p 2>/dev/null; else kill -CONT $p 2>/dev/null; fi
    shift
  done
  sleep 60
done
for p in $GRU_PIDS; do wait $p 2>/dev/null; done
