#!/bin/sh
# curl_example.sh - the README's KServe v2 JSON example, run against a live server.
#   tests/kserve/curl_example.sh http://127.0.0.1:8080
# Scaled dot-product attention of one query over two keys; the answer is
# checked against values worked by hand: weights softmax(1/sqrt(2), 0).
set -eu
URL=${1:-http://127.0.0.1:8080}

reply=$(curl -sS --fail-with-body -X POST "$URL/v2/models/attention-scaled_dot/infer" \
  -H 'Content-Type: application/json' \
  -d '{
        "id": "readme-1",
        "inputs": [
          {"name": "query", "shape": [1, 2], "datatype": "FP32", "data": [1, 0]},
          {"name": "key",   "shape": [2, 2], "datatype": "FP32", "data": [1, 0, 0, 1]},
          {"name": "value", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}
        ]
      }')
echo "$reply"

# weights = softmax([0.70710678, 0]) = [0.66976155, 0.33023845];
# output = 0.66976155 * [1, 2] + 0.33023845 * [3, 4] = [1.66047692, 2.66047692]
# Six significant digits: float32 results may differ in the last place
# between instruction sets (and sanitizer builds), never in the sixth.
expect='"outputs":[{"name":"output","datatype":"FP32","shape":[1,2],"data":[1.66047'
case "$reply" in
  *"$expect"*'{"name":"weights","datatype":"FP32","shape":[1,2],"data":[0.66976'*) echo "curl example: ok" ;;
  *) echo "curl example: unexpected reply" >&2; exit 1 ;;
esac
