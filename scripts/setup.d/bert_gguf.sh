#!/usr/bin/env bash
# all-MiniLM-L6-v2 (the test model scripts/setup.sh fetches first) as GGUF files of llama.cpp's `bert`
# architecture, F32 and Q8_0, for the local provider's BERT-family GGUF tests: converted by
# scripts/lib/gguf_convert_bert.py on PyPI's `gguf` (llama.cpp's converter needs torch), in the converter venv that
# scripts/lib/venv.sh pins -> $CACHE/models/all-MiniLM-L6-v2.F32.gguf and .Q8_0.gguf.
# Idempotent: converts only when the converter or its tools changed (a marker beside each file).
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
CONVERTER="$HERE/../lib/gguf_convert_bert.py"
FOLDER="$CACHE/models/all-MiniLM-L6-v2"

if [ ! -f "$FOLDER/model.safetensors" ]; then
  echo "setup: $FOLDER is missing; scripts/setup.sh fetches it before this step" >&2
  exit 1
fi
for type in F32 Q8_0; do
  out="$CACHE/models/all-MiniLM-L6-v2.$type.gguf"
  gguf_convert "$out" "converting all-MiniLM-L6-v2 to $out" "$CONVERTER" "$FOLDER" "$out" "$(echo "$type" | tr 'A-Z' 'a-z')"
done
