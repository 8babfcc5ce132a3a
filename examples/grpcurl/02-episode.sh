#!/usr/bin/env bash
# One episode end to end: open it on conv-26:q0 ("When did Caroline go to the LGBTQ support group?",
# gold "7 May 2023"), call each of the six tools, look at the state, score, close.
# EPISODE (default grpcurl-demo-<pid>) names the episode, so the script can run again on the same server.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
E=${EPISODE:-grpcurl-demo-$$}

call "{\"episode_id\":\"$E\",\"question_id\":\"conv-26:q0\",\"seed\":7}" memgym.v1.MemoryEnv/CreateEpisode \
  | expect '"created": true'
# Idempotent: the same request again returns the same live episode.
call "{\"episode_id\":\"$E\",\"question_id\":\"conv-26:q0\",\"seed\":7}" memgym.v1.MemoryEnv/CreateEpisode \
  | expect '"created": false'

tool "$E" search_memory '{"query": "LGBTQ support group", "top_k": 3}' | expect '\[m0000 '
# M0 says "recently"; the date is only in the session metadata. Put it in the text:
tool "$E" manage_memory '{"operation": "update", "memory_id": "m0000", "content": "Caroline attended an LGBTQ support group on 7 May 2023 and found the transgender stories inspiring."}' \
  | expect 'updated \[m0000\]'
tool "$E" split_memory '{"memory_id": "m0000", "split_criteria": "thematic"}' | expect '"removedId": "m0000"'
tool "$E" merge_memory '{"memory_ids": ["m0082", "m0083"], "strategy": "concatenate"}' | expect '"removedIds"'
tool "$E" sample_memory '{"k": 3, "strategy": "diverse"}' | expect '"sample"'
tool "$E" delete_memory '{"memory_id": "m0057", "reason": "not about the support group"}' | expect '"deletedIds"'

call "{\"episode_id\":\"$E\",\"include_trace\":true}" memgym.v1.MemoryEnv/GetEpisode | expect '"stepsUsed": 6'
call "{\"episode_id\":\"$E\",\"page_size\":2}" memgym.v1.MemoryEnv/ListMemories | expect '"nextPageToken": "[^"]+'
call "{\"episode_id\":\"$E\"}" memgym.v1.MemoryEnv/ScoreEpisode | expect '"pNew": 1'
call "{\"episode_id\":\"$E\"}" memgym.v1.MemoryEnv/CloseEpisode | expect '"scored": true'
