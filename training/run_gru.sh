#!/bin/sh
# Trains the three GRU models one after the other (one thread each).
# Usage: training/run_gru.sh MINUTES_EACH
M=${1:-28}
D=$(dirname "$0")
for r in concat additive general; do
  /usr/bin/python3 "$D/train.py" --model $r --minutes "$M" > "$D/logs/$r.log" 2>&1
done
