#!/usr/bin/env bash
# Installs the released client packages the protocols test tier (tests/python/protocols) runs against, from
# PyPI only, into four venvs under one root (the pins cannot share one: openenv 0.10.0 requires
# fastmcp>=3,<4, and every fastmcp 3 requires mcp<2, while the MCP client under test is mcp 2.3.0):
#   - $VENV/openenv: openenv==0.10.0 (GenericEnvClient over /ws, MCPToolClient, `openenv validate`), for
#     test_openenv.py;
#   - $VENV/mcp: mcp==2.3.0 (the official MCP Python SDK: streamable HTTP, modes "auto" and "legacy"), for
#     test_mcp.py;
#   - $VENV/mcp1: mcp==1.30.0 (the newest 1.x, the major openenv and fastmcp 3 still pin), for test_mcp1.py;
#   - $VENV/trl: trl==1.16.0 and transformers==5.23.0 (get_json_schema, the tool schemas TRL renders), with
#     torch from PyPI as trl's dependency (its CUDA libraries come along and load fine without a GPU), and
#     gguf (scripts/install-qwen.sh writes the Qwen2.5 tokenizer from its GGUF with it), for test_trl.py
#     and test_trl_grpo.py. Measured here: 1 min 47 s and 5.9 GB for this venv alone (torch is most of it).
#     With it trl's `openreward` extra and the openreward SDK pinned (0.1.167, the newest; trl asks >=0.1.109),
#     for test_ors.py (the SDK's client) and test_trl_ors.py (trl.experimental.openreward): about 60 MB more.
# Each also gets pytest, grpcio-health-checking and pyarrow (reads the `memgym dataset verl` export), and
# ./clients/python (memgym, memgym_verl, memgym_trl; reinstalled on every run, non-editable: the stubs are
# generated from proto/ at build time).
#
# VENV = ${MEMGYM_PROTOCOLS_VENV:-$HOME/.cache/memgym/protocols-venv}. Cold: about 3 minutes and 7 GB.
# Idempotent: each venv's pinned packages are installed once (a marker file names the pins; a changed pin
# list rebuilds that venv).
# Progress goes to stderr; stdout is exactly one line, ready for eval:
#   MEMGYM_PROTOCOLS_VENV=/.../protocols-venv
#
# Usage (tests/python/run.sh does this):
#   eval "$(scripts/install-protocols.sh)"; eval "$(scripts/install-qwen.sh "$MEMGYM_PROTOCOLS_VENV/trl/bin/python")"
#   cd tests/python
#   "$MEMGYM_PROTOCOLS_VENV/openenv/bin/python" -m pytest protocols/test_openenv.py
#   "$MEMGYM_PROTOCOLS_VENV/mcp/bin/python" -m pytest protocols/test_mcp.py
#   "$MEMGYM_PROTOCOLS_VENV/mcp1/bin/python" -m pytest protocols/test_mcp1.py
#   MEMGYM_QWEN_TOKENIZER=... "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest protocols/test_trl.py protocols/test_trl_grpo.py
#   "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest protocols/test_ors.py protocols/test_trl_ors.py
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

VENV=${MEMGYM_PROTOCOLS_VENV:-${HOME:?HOME is not set; set MEMGYM_PROTOCOLS_VENV}/.cache/memgym/protocols-venv}
COMMON=("pytest>=7" grpcio-health-checking pyarrow)

log() { printf 'install-protocols: %s\n' "$*" >&2; }

install_venv() {  # NAME PIP-REQUIREMENTS...
  local venv=$VENV/$1; shift
  local pins="$* ${COMMON[*]}"
  if [[ ! -f $venv/.memgym-installed || $(cat "$venv/.memgym-installed") != "$pins" ]]; then
    log "creating $venv with $pins"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
    "$venv/bin/pip" install --quiet "$@" "${COMMON[@]}" >&2
    printf '%s' "$pins" >"$venv/.memgym-installed"
  fi
  log "installing $ROOT/clients/python into $venv"
  "$venv/bin/pip" uninstall --quiet --yes memgym-client >/dev/null 2>&1 || true
  "$venv/bin/pip" install --quiet "$ROOT/clients/python" >&2
}

mkdir -p "$VENV"
install_venv openenv openenv==0.10.0
install_venv mcp mcp==2.3.0
install_venv mcp1 mcp==1.30.0
install_venv trl "trl[openreward]==1.16.0" openreward==0.1.167 transformers==5.23.0 gguf
echo "MEMGYM_PROTOCOLS_VENV=$VENV"
