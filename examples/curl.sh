#!/bin/sh
# examples/curl.sh - the attention service from the shell: health, rules, one attention and one multi-head call.
#
# Usage: sh examples/curl.sh [BASE_URL]      (default http://127.0.0.1:8080)
# Exits non-zero when any call fails (curl --fail-with-body prints the JSON
# error before failing).
set -eu
BASE=${1:-http://127.0.0.1:8080}
CURL="curl -sS --fail-with-body -m 30"

echo "== GET /healthz"
$CURL "$BASE/healthz"; echo

echo "== GET /rules (first 300 bytes)"
$CURL "$BASE/rules" | head -c 300; echo

echo "== POST /attention/scaled_dot: 2 queries, 3 keys, the last key masked out"
$CURL -H 'Content-Type: application/json' "$BASE/attention/scaled_dot" --data '{
  "query": [[1, 0], [0, 1]],
  "key":   [[1, 0], [0, 1], [1, 1]],
  "value": [[1, 2], [3, 4], [5, 6]],
  "key_mask": [true, true, false]
}'
echo

echo "== POST /multihead: seeded weights, self-attention, flat tensor form, headers shown (Server-Timing)"
$CURL -i -H 'Content-Type: application/json' "$BASE/multihead" --data '{
  "query": {"shape": [3, 4], "data": [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0]},
  "num_heads": 2,
  "seed": 42,
  "average_weights": true
}'
echo
