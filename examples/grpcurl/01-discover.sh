#!/usr/bin/env bash
# Discover the API by reflection: services, a method's documentation, the tool schemas, the dataset.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

"$GRPCURL" -plaintext "$A" list | expect '^memgym\.v1\.MemoryEnv$'
"$GRPCURL" -plaintext "$A" describe memgym.v1.MemoryEnv.CreateEpisode | expect 'idempotent'
"$GRPCURL" -plaintext "$A" describe memgym.v1.CallToolRequest | expect 'arguments_json'
"$GRPCURL" -plaintext -d '{"service":"memgym.v1.MemoryEnv"}' "$A" grpc.health.v1.Health/Check | expect 'SERVING'
call '{}' memgym.v1.MemoryEnv/ListTools | expect '"name": "split_memory"'
call '{}' memgym.v1.Dataset/ListConversations | expect '"conversationId": "conv-26"'
call '{"conversation_id":"conv-26","page_size":2}' memgym.v1.Dataset/ListQuestions | expect '"id": "conv-26:q0"'
