#!/usr/bin/env bash
# Runs the Python tests (tests/python) against the real memgym server binary.
#
# Creates the venv if missing ($MEMGYM_PYVENV, default ~/.cache/memgym/pyvenv), installs
# ./clients/python (non-editable: the stubs are generated from proto/ at build time) plus pytest,
# grpcio-health-checking, pydantic and omegaconf (for the tool-config test), pyarrow and vermin (the
# Python 3.9 check) from PyPI, downloads the verl 0.5.0, 0.7.0, 0.7.1 and 0.9.1 wheels (no dependencies,
# ~1 MB each, never installed: test_verl_versions.py parses their agent/reward loops, test_launch_script.py
# reads 0.7.1's and 0.9.1's config) into $MEMGYM_VERL_WHEELS (default ~/.cache/memgym/verl-wheels) when
# missing, then runs pytest. The tests start the server themselves on a free loopback port.
#
# verl: `pip install verl --no-deps` gives a verl whose `verl.tools.base_tool` cannot be imported without
# torch, ray, numpy and tensordict (verl/__init__.py imports verl.protocol), so it is not installed here;
# the tests use tests/python/verl_stub (verbatim copies of verl 0.9.1's BaseTool and schemas) unless a
# working verl is already importable in the venv.
#
# Environment: MEMGYM_BIN (default $CARGO_TARGET_DIR/debug/memgym, else ~/.cache/memgym/target/debug/memgym),
# GRPCURL (for the grpcurl examples test; default ~/.cache/memgym/venv/bin/grpcurl, skipped if absent).
# Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
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
  echo "== creating $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
fi
echo "== installing clients/python and the test requirements into $VENV"
"$VENV/bin/pip" install --quiet "$ROOT/clients/python" "pytest>=7" grpcio-health-checking "pydantic>=2" omegaconf pyarrow vermin

export MEMGYM_VERL_WHEELS=${MEMGYM_VERL_WHEELS:-$HOME/.cache/memgym/verl-wheels}
for v in 0.5.0 0.7.0 0.7.1 0.9.1; do
  if ! compgen -G "$MEMGYM_VERL_WHEELS/verl-$v-*.whl" >/dev/null; then
    echo "== downloading the verl $v wheel into $MEMGYM_VERL_WHEELS"
    "$VENV/bin/pip" download --quiet --no-deps "verl==$v" -d "$MEMGYM_VERL_WHEELS" \
      || echo "warning: verl $v wheel not downloaded; the tests that read it will skip" >&2
  fi
done

echo "== pytest tests/python (server: $MEMGYM_BIN)"
cd "$ROOT/tests/python"
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider "$@"
