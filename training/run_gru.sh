#!/bin/sh
# Trains the three GRU models (one thread each) for the same number of
# steps: concat and additive in parallel, then general. The wall-time cap
# is a safety net only (a run stopped by it logs fewer steps). Each run is
# its own session (setsid): Linux's scheduler autogroups share the CPU per
# session, so two runs in one session would split one share.
# Usage: training/run_gru.sh [STEPS] [MINUTES_CAP]
S=${1:-450}
M=${2:-38}
D=$(dirname "$0")
run() { setsid -w /usr/bin/python3 "$D/train.py" --model "$1" --max-steps "$S" --minutes "$M" > "$D/logs/$1.log" 2>&1; }
run concat & run additive & wait
run general
