#!/usr/bin/env bash
# Installs the released client packages the protocols test tier (tests/python/protocols) runs against, from
# PyPI only, into five venvs under one root (the pins cannot share one: openenv 0.10.0 requires
# fastmcp>=3,<4, and every fastmcp 3 requires mcp<2, while the MCP client under test is mcp 2.3.0 and
# verifiers 0.4.0 pins mcp==2.0.0):
#   - $VENV/openenv: openenv==0.10.0 (GenericEnvClient over /ws, MCPToolClient, `openenv validate`), for
#     test_openenv.py;
#   - $VENV/mcp: mcp==2.3.0 (the official MCP Python SDK: streamable HTTP, modes "auto" and "legacy"), for
#     test_mcp.py;
#   - $VENV/mcp1: mcp==1.30.0 (the newest 1.x, the major openenv and fastmcp 3 still pin), for test_mcp1.py;
#   - $VENV/nemo_gym: nemo-gym==0.7.0 (NeMo Gym: its SimpleAgent, ServerClient and session-contract check), for
#     test_nemo_gym.py, on Python 3.13 (nemo-gym needs 3.12 or later, the machine's python3 is 3.11): the first
#     that runs of $MEMGYM_PYTHON313, pyenv's newest 3.13, python3.13 on PATH. nemo-gym 0.5.0 and later declare
#     Requires-Python >=3.13.14, newer than any 3.13 here (pyenv's is 3.13.0, 0.4.0 the newest release that
#     installs as declared), so it is installed with pip's --ignore-requires-python; its code runs on 3.13.0.
#     Measured here: 1 min 8 s (pip's cache warm) and 1.4 GB (ray, mlflow, wandb, datasets come along).
#   - $VENV/trl: trl==1.16.0 and transformers==5.23.0 (get_json_schema, the tool schemas TRL renders), with
#     torch from PyPI as trl's dependency (its CUDA libraries come along and load fine without a GPU), and
#     gguf (scripts/install-qwen.sh writes the Qwen2.5 tokenizer from its GGUF with it), for test_trl.py
#     and test_trl_grpo.py. Measured here: 1 min 47 s and 5.9 GB for this venv alone (torch is most of it).
#     With it trl's `openreward` extra and the openreward SDK pinned (0.1.167, the newest; trl asks >=0.1.109),
#     for test_ors.py (the SDK's client) and test_trl_ors.py (trl.experimental.openreward): about 60 MB more;
#   - $VENV/verifiers: verifiers==0.4.0 (verifiers.v1: vf-eval, the interception server, the null chat harness,
#     with mcp 2.0.0) and uv (the harness runs as a PEP 723 script through `uv sync --script`, which fetches
#     its dependencies from PyPI on first use), plus ./environments/memgym_locomo (the Environments Hub
#     package, id memgym-locomo), for test_verifiers.py. Measured here: 1 min 38 s and 0.8 GB.
# Each also gets pytest, grpcio-health-checking and pyarrow (reads the `memgym dataset verl` export), and
# ./clients/python (memgym, memgym_verl, memgym_trl, memgym_verifiers; reinstalled on every run, non-editable:
# the stubs are generated from proto/ at build time).
#
# VENV = ${MEMGYM_PROTOCOLS_VENV:-$HOME/.cache/memgym/protocols-venv}. Cold: about 4 minutes and 8.5 GB.
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
#   "$MEMGYM_PROTOCOLS_VENV/nemo_gym/bin/python" -m pytest protocols/test_nemo_gym.py
#   MEMGYM_QWEN_TOKENIZER=... "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest protocols/test_trl.py protocols/test_trl_grpo.py
#   "$MEMGYM_PROTOCOLS_VENV/verifiers/bin/python" -m pytest protocols/test_verifiers.py
#   "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest protocols/test_ors.py protocols/test_trl_ors.py
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

VENV=${MEMGYM_PROTOCOLS_VENV:-${HOME:?HOME is not set; set MEMGYM_PROTOCOLS_VENV}/.cache/memgym/protocols-venv}
COMMON=("pytest>=7" grpcio-health-checking pyarrow)

log() { printf 'install-protocols: %s\n' "$*" >&2; }

install_venv() {  # [--python INTERPRETER] [--ignore-requires-python] NAME PIP-REQUIREMENTS...
  local python=python3 pip_flags=()
  while [[ $1 == --* ]]; do
    case $1 in
      --python) python=$2; shift 2 ;;
      --ignore-requires-python) pip_flags+=("$1"); shift ;;
      *) log "install_venv: unknown option $1"; return 2 ;;
    esac
  done
  local venv=$VENV/$1; shift
  local pins="$* ${COMMON[*]}"
  # A venv of another interpreter names it (and the pip flags) in its marker; python3's keep their marker.
  if [[ $python != python3 ]]; then
    pins+="${pip_flags[*]:+ ${pip_flags[*]}} (python $("$python" -c 'import platform; print(platform.python_version())'))"
  fi
  if [[ ! -f $venv/.memgym-installed || $(cat "$venv/.memgym-installed") != "$pins" ]]; then
    log "creating $venv with $pins"
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip >&2
    "$venv/bin/pip" install --quiet "${pip_flags[@]}" "$@" "${COMMON[@]}" >&2
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
python313() {  # the first Python 3.13 that runs (see the header), or nothing
  local c
  for c in "${MEMGYM_PYTHON313:-}" $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13.*/bin/python 2>/dev/null | sort -V -r) \
    "$(command -v python3.13 || true)"; do
    [[ -n $c ]] && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null && { echo "$c"; return; }
  done
  return 0
}
if py313=$(python313) && [[ -n $py313 ]]; then
  install_venv --python "$py313" --ignore-requires-python nemo_gym nemo-gym==0.7.0
else
  log "no Python 3.13 (set MEMGYM_PYTHON313): the nemo_gym venv is not made, and test_nemo_gym.py cannot run"
fi
install_venv verifiers verifiers==0.4.0 uv
log "installing $ROOT/environments/memgym_locomo into $VENV/verifiers"
"$VENV/verifiers/bin/pip" uninstall --quiet --yes memgym-locomo >/dev/null 2>&1 || true
"$VENV/verifiers/bin/pip" install --quiet --no-deps "$ROOT/environments/memgym_locomo" >&2
echo "MEMGYM_PROTOCOLS_VENV=$VENV"
