#!/usr/bin/env bash
# Installs real verl, with torch and everything its agent loop, reward loop, dataset and config code import,
# into two venvs (PyPI only; torch comes with its CUDA libraries, which load fine on a machine without a GPU):
#   - $ROOT/venv-0.7: verl==0.7.1's dependency set (numpy<2; pyarrow 19 and datasets<4, which still load with
#     numpy 1), used for verl 0.7.1 and 0.8.0;
#   - $ROOT/venv-0.9: verl==0.9.1's dependency set (numpy>=2, transformers>=5.5.3,<5.11), for 0.9.0 and 0.9.1.
# Each venv also gets what verl imports without declaring it (cachetools, uvicorn, fastapi — vLLM/SGLang
# bring them in a GPU install), gguf (transformers reads the Qwen tokenizer from a GGUF), pytest and
# grpcio-health-checking. The released wheels of every tested verl ($WHEELS/verl-V-*.whl) are unpacked
# into $WHEELS/src/V/; a test run puts one of them first on PYTHONPATH, so it runs that release's code.
#
# ROOT = ${MEMGYM_VERL_ROOT:-$HOME/.cache/memgym/verl}; WHEELS = ${MEMGYM_VERL_WHEELS:-$HOME/.cache/memgym/verl-wheels}
# Cold: about 4 minutes and 6.5 GB per venv. Idempotent: a venv whose marker file exists is kept.
# stdout: MEMGYM_VERL_ROOT=… and MEMGYM_VERL_WHEELS=…
set -euo pipefail

ROOT=${MEMGYM_VERL_ROOT:-$HOME/.cache/memgym/verl}
WHEELS=${MEMGYM_VERL_WHEELS:-$HOME/.cache/memgym/verl-wheels}
EXTRA=(cachetools uvicorn fastapi gguf "pytest>=7" grpcio-health-checking)

log() { printf 'install-verl: %s\n' "$*" >&2; }

install_family() {  # FAMILY PIP-REQUIREMENTS...
  local family=$1; shift
  local venv=$ROOT/venv-$family
  if [[ -f $venv/.memgym-installed ]]; then return; fi
  log "creating $venv with $* (torch included: a few minutes)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip >&2
  "$venv/bin/pip" install --quiet "$@" "${EXTRA[@]}" >&2
  touch "$venv/.memgym-installed"
}

mkdir -p "$ROOT" "$WHEELS/src"
install_family 0.7 "verl==0.7.1" "numpy<2" "pyarrow==19.0.1" "datasets<4"
install_family 0.9 "verl==0.9.1" "TransferQueue>=0.1.10" pyzmq msgspec  # the verl-core extra: the v1 trainer

for v in 0.7.1 0.8.0 0.9.0 0.9.1; do
  if [[ ! -d $WHEELS/src/$v/verl ]]; then
    if ! compgen -G "$WHEELS/verl-$v-*.whl" >/dev/null; then
      log "downloading the verl $v wheel"
      python3 -m pip download --quiet --no-deps "verl==$v" -d "$WHEELS" >&2
    fi
    log "unpacking verl $v into $WHEELS/src/$v"
    rm -rf "$WHEELS/src/$v.tmp" && mkdir -p "$WHEELS/src/$v.tmp"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$(ls "$WHEELS"/verl-$v-*.whl | head -1)" "$WHEELS/src/$v.tmp"
    mv "$WHEELS/src/$v.tmp" "$WHEELS/src/$v"
  fi
done
echo "MEMGYM_VERL_ROOT=$ROOT"
echo "MEMGYM_VERL_WHEELS=$WHEELS"
