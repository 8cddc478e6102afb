#!/usr/bin/env bash
# Opt-in (MEMORY_SETUP_SENTENCE_TRANSFORMERS=1): sentence-transformers itself, on torch on the CPU, as the reference
# for the local provider's EmbeddingGemma in f32 (crates/model-runtime/tests/gguf_model.rs,
# `f32_file_matches_sentence_transformers_on_the_folder`, skipped without what this step makes):
#   - a venv $CACHE/st-venv with torch, sentence-transformers and transformers from PyPI (pinned). PyPI's Linux torch
#     is a CUDA build whose libtorch links a dozen CUDA libraries, so those wheels are installed too (never used on
#     the CPU); everything goes in with --no-deps from the list below, which leaves out what torch only needs on a
#     GPU or for compiling (triton, cuSOLVER, cuda-bindings): 2.6 GB downloaded, 4.5 GB installed
#     (docs/BENCHMARKS.md, "EmbeddingGemma in f32 beside sentence-transformers").
#   - $CACHE/models/embeddinggemma-300m-F32.gguf: the folder from scripts/setup.d/embeddinggemma.sh in F32
#     (scripts/lib/gguf_convert_gemma.py, with that step's venv)
#   - $CACHE/models/embeddinggemma-300m.reference.json: sentence-transformers' vectors of the test texts
#     (scripts/lib/st_reference.py)
# Idempotent: installs when the pins changed, converts and computes when the scripts or the pins changed.
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
[ "${MEMORY_SETUP_SENTENCE_TRANSFORMERS:-}" = 1 ] || exit 0
HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../lib/venv.sh"
VENV="$CACHE/st-venv"
FOLDER="$CACHE/models/embeddinggemma-300m"
GGUF="$CACHE/models/embeddinggemma-300m-F32.gguf"
REF="$CACHE/models/embeddinggemma-300m.reference.json"
CONVERTER="$HERE/../lib/gguf_convert_gemma.py"
REFERENCE="$HERE/../lib/st_reference.py"
TEXTS="$HERE/../../crates/model-runtime/tests/data/gguf_reference_texts.txt"
# torch 2.15.0's own dependencies and the CUDA libraries its libtorch links (the ones `ldd` names), then
# sentence-transformers, transformers and what they import.
PINS="torch==2.15.0 filelock==4.3.2 typing_extensions==4.16.0 sympy==1.14.0 mpmath==1.4.1 networkx==3.6.1
  Jinja2==3.1.6 MarkupSafe==3.0.4 fsspec==2026.9.0
  nvidia-cuda-runtime==13.2.86 nvidia-cuda-cupti==13.2.86 nvidia-cuda-nvrtc==13.2.86 nvidia-cublas==13.4.1.3
  nvidia-cudnn-cu13==9.26.0.51 nvidia-cufft==12.2.0.57 nvidia-cufile==1.17.1.22 nvidia-cusparse==12.7.10.12
  nvidia-nvjitlink==13.5.37 nvidia-cusparselt-cu13==0.8.1 nvidia-nccl-cu13==2.30.7 nvidia-nvshmem-cu13==3.7.2
  sentence-transformers==6.3.0 transformers==5.25.0 huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0
  numpy==2.4.6 scipy==1.17.1 scikit-learn==1.9.1 joblib==1.6.0 threadpoolctl==3.8.0 narwhals==2.29.0
  cloudpickle==3.1.3 tqdm==4.70.1 regex==2026.12.2 PyYAML==6.0.4 packaging==26.4 httpx2==2.17.0
  httpcore2==2.17.0 h11==0.16.0 anyio==4.16.0 sniffio==1.3.1 idna==3.21 certifi==2026.10.19.post1
  truststore==0.10.5"
PINS="$(echo $PINS)"

[ -f "$FOLDER/model.safetensors" ] || { echo "setup: sentence-transformers reference: no EmbeddingGemma folder at $FOLDER (scripts/setup.d/embeddinggemma.sh makes it)" >&2; exit 1; }

if [ "$(cat "$VENV/.installed" 2>/dev/null)" != "$PINS" ]; then
  # shellcheck disable=SC2086
  fresh_venv "$VENV" "torch (CPU use; 2.6 GB with its CUDA libraries) and sentence-transformers" --no-deps $PINS
  "$VENV/bin/python" -c 'import torch, sentence_transformers; torch.ones(2) @ torch.ones(2)'
  echo "$PINS" > "$VENV/.installed"
fi

stamp="f32 $(cat "$CONVERTER" "$HERE/../lib/gguf_write.py" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$GGUF" ] || [ "$(cat "$GGUF.converted" 2>/dev/null)" != "$stamp" ]; then
  echo "setup: converting EmbeddingGemma to $GGUF (F32)" >&2
  "$GGUF_VENV/bin/python" "$CONVERTER" "$FOLDER" "$GGUF" f32 2> >(grep -v "second separator token" >&2)
  echo "$stamp" > "$GGUF.converted"
fi

stamp="$PINS $(cat "$REFERENCE" "$TEXTS" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$REF" ] || [ "$(cat "$REF.made" 2>/dev/null)" != "$stamp" ]; then
  echo "setup: computing sentence-transformers' EmbeddingGemma vectors into $REF" >&2
  HF_HUB_OFFLINE=1 "$VENV/bin/python" "$REFERENCE" "$FOLDER" "$TEXTS" "$REF" 2> >(grep -v "Loading weights" >&2)
  echo "$stamp" > "$REF.made"
fi
