#!/bin/sh
# Trains the three GRU models (one thread each), the same way and for the
# same number of steps, never more than two processes at once:
#   phase 1: STEPS1 steps from scratch;
#   phase 2: from phase 1's best weights (--init, fresh Adam, the
#            learning-rate schedule continuing at step STEPS1) to step STEPS2.
# Schedule: concat and additive phase 1 in parallel; then general phase 1
# and phase 2 in one lane, concat and additive phase 2 in the other.
# MINUTES caps each process (a safety net: a capped run logs fewer steps).
# Each run is its own session (setsid): Linux's scheduler autogroups share
# the CPU per session, so two runs in one session would split one share.
# Usage: training/run_gru.sh [STEPS1] [STEPS2] [MINUTES]
S1=${1:-450}
S2=${2:-1050}
M=${3:-38}
D=$(dirname "$0")
py() { setsid -w /usr/bin/python3 "$D/train.py" "$@"; }
p1() { py --model "$1" --max-steps "$S1" --minutes "$M" > "$D/logs/$1.log" 2>&1; }
p2() { py --model "$1" --init "$D/weights/$1.safetensors" --start-step "$S1" --max-steps "$S2" \
          --minutes "$M" > "$D/logs/$1_cont.log" 2>&1; }
case "$4" in
phase2-only) ;;   # (used once: phase 1 was already running when phase 2 was scheduled)
*) p1 concat & p1 additive & wait ;;
esac
{ [ "$4" = phase2-only ] || p1 general; p2 general; } &
{ p2 concat; p2 additive; } &
wait
