#!/usr/bin/env bash
# The README's grpcurl walk-through, run for real and checked: starts `memgym serve` on a free loopback
# port, drives one episode through every tool with grpcurl (reflection only, no .proto), and checks
# each answer. Prints "N passed, M failed" and exits non-zero on any failure.
#
# Usage: scripts/grpcurl-walkthrough.sh [path/to/memgym] [path/to/grpcurl]
set -uo pipefail
MEMGYM=${1:-${MEMGYM_BIN:-memgym}}
GRPCURL=${2:-${GRPCURL:-grpcurl}}
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
A=127.0.0.1:$PORT
LOG=$(mktemp)
BANKS=$(mktemp -d)
"$MEMGYM" serve --addr "$A" --banks-dir "$BANKS" >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null; rm -rf "$LOG" "$BANKS"' EXIT
for _ in $(seq 1 100); do
  "$GRPCURL" -plaintext -d '{"service":"memgym.v1.MemoryEnv"}' "$A" grpc.health.v1.Health/Check >/dev/null 2>&1 && break
  sleep 0.2
done

passed=0; failed=0
# check NAME PYTHON_EXPR: runs the grpcurl command that follows "--", evaluates EXPR with `r` = parsed JSON.
check() {
  local name=$1 expr=$2; shift 3
  local out
  if out=$("$@" 2>&1) && printf '%s' "$out" | python3 -c "import json,sys; r=json.load(sys.stdin); sys.exit(0 if ($expr) else 1)" 2>/dev/null; then
    passed=$((passed+1)); echo "ok   $name"
  else
    failed=$((failed+1)); echo "FAIL $name"; printf '%s\n' "$out" | head -20
  fi
}
# expect_code NAME CODE CMD...: the command must fail with that gRPC status code.
expect_code() {
  local name=$1 code=$2; shift 2
  local out
  if ! out=$("$@" 2>&1) && printf '%s' "$out" | grep -q "Code: $code"; then
    passed=$((passed+1)); echo "ok   $name"
  else
    failed=$((failed+1)); echo "FAIL $name"; printf '%s\n' "$out" | head -20
  fi
}
call() { "$GRPCURL" -plaintext -emit-defaults -d "$1" "$A" "memgym.v1.$2"; }
tool() { call "{\"episode_id\":\"demo-1\",\"tool_name\":\"$1\",\"arguments_json\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$2")}" MemoryEnv/CallTool; }

if "$GRPCURL" -plaintext "$A" list | grep -q '^memgym.v1.MemoryEnv$'; then passed=$((passed+1)); echo "ok   list (reflection)"; else failed=$((failed+1)); echo "FAIL list"; fi
if "$GRPCURL" -plaintext "$A" describe memgym.v1.MemoryEnv.CreateEpisode | grep -q 'idempotent'; then passed=$((passed+1)); echo "ok   describe shows proto docs"; else failed=$((failed+1)); echo "FAIL describe"; fi
check "health" 'r["status"] == "SERVING"' -- "$GRPCURL" -plaintext -d '{"service":"memgym.v1.MemoryEnv"}' "$A" grpc.health.v1.Health/Check
check "list tools" 'len(r["tools"]) == 6' -- call '{}' MemoryEnv/ListTools
check "questions of conv-26" 'r["total"] == 199' -- call '{"conversation_id":"conv-26","page_size":3}' Dataset/ListQuestions
check "create" 'r["initialMemoryCount"] == 184 and r["created"]' -- call '{"episode_id":"demo-1","question_id":"conv-26:q0","seed":7}' MemoryEnv/CreateEpisode
check "create again (idempotent)" 'not r["created"]' -- call '{"episode_id":"demo-1","question_id":"conv-26:q0","seed":7}' MemoryEnv/CreateEpisode
check "search shows ids first" 'r["text"].startswith("[m0000 ") and "recently" in r["text"]' -- tool search_memory '{"query": "LGBTQ support group", "top_k": 3}'
check "update adds the date" 'r["manage"]["memory"]["evidence"] == ["D1:3"]' -- tool manage_memory '{"operation": "update", "memory_id": "m0000", "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."}'
check "split by theme" 'r["split"]["removedId"] == "m0000" and len(r["split"]["parts"]) == 2' -- tool split_memory '{"memory_id": "m0000", "split_criteria": "thematic"}'
check "merge unions evidence" 'r["merge"]["memory"]["evidence"] == ["D10:3", "D10:5"]' -- tool merge_memory '{"memory_ids": ["m0082", "m0083"], "strategy": "concatenate"}'
check "sample diverse" 'len(r["sample"]["memories"]) == 3' -- tool sample_memory '{"k": 3, "strategy": "diverse"}'
check "delete" 'r["delete"]["memoryCount"] == 183' -- tool delete_memory '{"memory_id": "m0057", "reason": "not about the support group"}'
expect_code "unknown id is NotFound" NotFound tool delete_memory '{"memory_id": "m0999"}'
expect_code "bad argument is InvalidArgument" InvalidArgument tool search_memory '{"query": "x", "top_k": 0}'
check "state" 'r["state"]["stepsUsed"] == 6 and r["state"]["memoryCount"] == 183' -- call '{"episode_id":"demo-1","include_trace":true}' MemoryEnv/GetEpisode
check "score: p 0 -> 1, reward > 0" 'r["pOld"] == 0 and r["pNew"] == 1 and r["reward"] > 0.9' -- call '{"episode_id":"demo-1"}' MemoryEnv/ScoreEpisode
check "close" 'r["state"]["scored"]' -- call '{"episode_id":"demo-1"}' MemoryEnv/CloseEpisode
# The banks: a Training-Free GRPO experience library.
check "create bank" 'r["name"] == "math" and r["version"] == "0"' -- call '{"name":"math"}' Banks/CreateBank
check "add experience" 'r["id"] == "G0"' -- call '{"bank":"math","text":"When solving equations, verify solutions by substitution.","domain":"math"}' Banks/AddExperience
check "apply operations" 'r["applied"] == 2 and r["results"][0]["id"] == "G1"' -- call '{"bank":"math","operations_json":"[{\"option\":\"add\",\"experience\":\"For optimization, check boundary conditions first.\"},{\"operation\":\"UPDATE\",\"id\":\"G0\",\"content\":\"Verify solutions by substituting them back.\"}]"}' Banks/ApplyOperations
check "format for prompt" 'r["text"] == "[G0]. Verify solutions by substituting them back.\n[G1]. For optimization, check boundary conditions first."' -- call '{"bank":"math"}' Banks/FormatForPrompt
check "retrieve" 'r["hits"][0]["id"] == "G1"' -- call '{"bank":"math","query":"check the boundary conditions","top_k":1}' Banks/Retrieve
expect_code "stale expected_version is Aborted" Aborted call '{"bank":"math","text":"x","expected_version":"0"}' Banks/AddExperience
check "create agent bank" 'r["kind"] == "BANK_KIND_AGENT"' -- call '{"name":"agent","kind":"BANK_KIND_AGENT"}' Banks/CreateBank
check "record episode" 'r["totalEpisodes"] == "1" and r["rulesAdded"] == ["[WORKS] search before answering"]' -- call '{"bank":"agent","task_id":"qa","score":0.9,"steps":3,"trajectory_summary":"searched, then answered","successes":["search before answering"]}' AgentMemory/RecordEpisode
check "memory context" 'r["context"].startswith("## MEMORY FROM PAST EPISODES\n\nRules for qa:\n  - [WORKS] search before answering") and r["context"].endswith("Your mean score on qa: 0.90 (over 1 episodes)")' -- call '{"bank":"agent","task_id":"qa"}' AgentMemory/BuildMemoryContext
check "consolidation not due yet" 'not r["ran"]' -- call '{"bank":"agent"}' AgentMemory/MaybeConsolidate
echo "grpcurl walkthrough: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
