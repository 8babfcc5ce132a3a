#!/usr/bin/env bash
# What bad calls look like: each must FAIL with the documented gRPC status (the script fails otherwise).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
E=${EPISODE:-grpcurl-errors-$$}

# must_fail CODE CMD...: the command fails and prints "Code: CODE".
must_fail() {
  local code=$1 out; shift
  if out=$("$@" 2>&1); then echo "expected $code, got success: $out" >&2; return 1; fi
  printf '%s\n' "$out"
  printf '%s' "$out" | grep -q "Code: $code" || { echo "expected Code: $code" >&2; return 1; }
}

call "{\"episode_id\":\"$E\",\"question_id\":\"conv-26:q0\"}" memgym.v1.MemoryEnv/CreateEpisode >/dev/null
must_fail InvalidArgument tool "$E" no_such_tool '{}'
must_fail InvalidArgument tool "$E" search_memory '{"query": "x", "top_k": 0}'
must_fail NotFound tool "$E" delete_memory '{"memory_id": "m9999"}'
must_fail AlreadyExists call "{\"episode_id\":\"$E\",\"question_id\":\"conv-26:q1\"}" memgym.v1.MemoryEnv/CreateEpisode
call "{\"episode_id\":\"$E\"}" memgym.v1.MemoryEnv/GetEpisode | expect '"rejectedCalls": 3'
call "{\"episode_id\":\"$E\"}" memgym.v1.MemoryEnv/CloseEpisode >/dev/null
must_fail FailedPrecondition call "{\"episode_id\":\"$E\"}" memgym.v1.MemoryEnv/GetEpisode   # ended ids are remembered, never reused
