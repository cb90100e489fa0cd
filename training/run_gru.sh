#!/bin/sh
# Trains the three GRU models, one thread each, for the same number of
# steps, with at most two of them running at a time: the three processes
# take turns, one of them paused (SIGSTOP) for a minute in rotation, so each
# gets two thirds of a core's lane and they end together. Pausing does not
# change what a run computes (fixed seeds, one thread); MINUTES is a
# wall-clock safety cap per process (paused time included; a capped run logs
# fewer steps). Each run is its own session (setsid): Linux's scheduler
# autogroups share the CPU per session.
# Usage: training/run_gru.sh [STEPS] [MINUTES]
S=${1:-2600}
M=${2:-47}
D=$(dirname "$0")
PIDS=""
for r in concat additive general; do
  setsid /usr/bin/python3 "$D/train.py" --model $r --max-steps "$S" --minutes "$M" > "$D/logs/$r.log" 2>&1 &
  PIDS="$PIDS $!"
done
alive() { n=0; for p in $PIDS; do kill -0 $p 2>/dev/null && n=$((n + 1)); done; echo $n; }
i=0
while [ "$(alive)" -gt 0 ]; do
  k=0
  for p in $PIDS; do
    if [ "$(alive)" -ge 3 ] && [ $k -eq $((i % 3)) ]; then kill -STOP $p 2>/dev/null; else kill -CONT $p 2>/dev/null; fi
    k=$((k + 1))
  done
  i=$((i + 1))
  sleep 60
done
for p in $PIDS; do wait $p 2>/dev/null; done
