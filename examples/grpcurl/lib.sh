# Shared helpers for the grpcurl examples (sourced, not run).
#
# Why this exists: every example talks to memgym through server reflection only (no .proto file), with
# the same flags; `call` and `tool` keep each example a readable list of RPCs. Any failed RPC makes
# grpcurl exit non-zero, and `set -euo pipefail` in the caller turns that into the script's exit code.
#
# Environment: GRPCURL (default: grpcurl on PATH), MEMGYM_ADDRESS (default 127.0.0.1:50051).
GRPCURL=${GRPCURL:-grpcurl}
A=${MEMGYM_ADDRESS:-127.0.0.1:50051}

# call JSON METHOD: one RPC, e.g. call '{}' memgym.v1.MemoryEnv/ListTools
call() { "$GRPCURL" -plaintext -emit-defaults -d "$1" "$A" "$2"; }

# tool EPISODE NAME ARGS_JSON: CallTool with the arguments an LLM would emit (ARGS_JSON is JSON-escaped here).
tool() {
  local args
  args=$(printf '%s' "$3" | sed 's/\\/\\\\/g; s/"/\\"/g')
  call "{\"episode_id\":\"$1\",\"tool_name\":\"$2\",\"arguments_json\":\"$args\"}" memgym.v1.MemoryEnv/CallTool
}

# expect PATTERN: stdin must contain PATTERN (grep -E), else the script fails naming it.
expect() {
  local out
  out=$(cat)
  printf '%s\n' "$out"
  if ! printf '%s' "$out" | grep -qE "$1"; then
    echo "expected /$1/ in the answer above" >&2
    return 1
  fi
}
