#!/usr/bin/env bash
# `memgym bench` through HAProxy in front of three replicas against one replica reached directly, in one
# run (the book's "Operations → Replicas"; docs/perf-replicas.txt holds the last run).
#
# Builds the release binary (or takes $MEMGYM_BIN), starts a throwaway PostgreSQL (scripts/postgres.sh) for the replicas' banks,
# three `memgym serve --replica rN`, and haproxy with deploy/haproxy.cfg as committed, then runs
#   memgym bench --addr PROXY --compare-addr R1 [BENCH FLAGS...]
# (default flags: --episodes 512 --calls 50 --in-flight 64). Needs Debian's haproxy and postgresql packages.
# Run it on an idle machine: the client, the proxy and the three replicas share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/memgym/target}
if [ -n "${MEMGYM_BIN:-}" ]; then B=$MEMGYM_BIN; else cargo build --release --quiet; B=$CARGO_TARGET_DIR/release/memgym; fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "nothing listens on $1" >&2; return 1; }

pg=$(scripts/postgres.sh start --watch $$)
eval "$pg"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; scripts/postgres.sh stop "$MEMGYM_TEST_POSTGRES_DIR"; }
trap cleanup EXIT

MEMGYM_PROXY_ADDR=127.0.0.1:$(free_port)
export MEMGYM_PROXY_ADDR
for r in 1 2 3; do
  port=$(free_port) ready=$(free_port)
  "$B" serve --replica "r$r" --addr "127.0.0.1:$port" --metrics-addr "127.0.0.1:$ready" \
    --banks-url "$MEMGYM_TEST_POSTGRES_URL" --max-episodes 100000 2>/dev/null &
  pids+=($!)
  export "MEMGYM_R$r=127.0.0.1:$port" "MEMGYM_R${r}_READY=$ready"
  wait_port "$port"; wait_port "$ready"
done
haproxy -db -f deploy/haproxy.cfg &
pids+=($!)
wait_port "${MEMGYM_PROXY_ADDR##*:}"
sleep 1.5   # the first health checks

nproc; grep -m1 'model name' /proc/cpuinfo || true; haproxy -v | head -1
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--episodes 512 --calls 50 --in-flight 64)
echo "\$ memgym bench --addr PROXY --compare-addr R1 ${flags[*]}"
"$B" bench --addr "$MEMGYM_PROXY_ADDR" --compare-addr "$MEMGYM_R1" --embedder-baseline-secs 0 --grpc-ceiling-secs 0 "${flags[@]}" 2>&1 | grep -v ' INFO '
