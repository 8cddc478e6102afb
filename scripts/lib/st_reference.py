#!/usr/bin/env python3
"""Reference embeddings of a sentence-transformers folder, computed by sentence-transformers itself (torch, CPU,
float32), for the test that checks the local provider on the same model (crates/model-runtime/tests/gguf_model.rs,
EmbeddingGemma). The even-numbered texts are encoded as queries and the odd ones as documents, with the folder's
own `query` and `document` prompts (config_sentence_transformers.json), as the local provider applies them. After
the texts of TEXTS.txt come long ones made of them (LONG_CHARS): past the local layers' 256-token window, and past
the model's 2,048 tokens, where both sides cut the tokens to 2,048 with the end token kept.

Usage: st_reference.py MODEL_DIR TEXTS.txt OUT.json
Writes {"model", "versions", "prompts": {"query", "document"}, "texts": [...], "purposes": ["query"|"document"],
"vectors": [[...], ...]} (L2-normalised, as the folder's Normalize module leaves them), to OUT.json.partial first
and renamed, so a killed run never leaves a file that looks complete.
Needs torch, sentence-transformers (and transformers).
"""
import json
import os
import sys
from pathlib import Path

import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer


# Lengths in characters of the long texts: a few hundred tokens, about a thousand, and well past 2,048.
LONG_CHARS = [1500, 4000, 9000, 30000]


def long_texts(texts):
    """Texts of about LONG_CHARS characters, each the short texts joined from a different starting point."""
    out = []
    for n, chars in enumerate(LONG_CHARS):
        parts, i = [], n * 37
        while sum(len(p) + 1 for p in parts) < chars:
            parts.append(texts[i % len(texts)])
            i += 1
        out.append(" ".join(parts))
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model_dir, texts_path, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    texts = [l for l in texts_path.read_text(encoding="utf-8").split("\n") if l.strip()]
    texts += long_texts(texts)
    # Hub kernels would be fetched from the network: the model's own torch code runs.
    model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True, model_kwargs={"use_kernels": False})
    prompts = {"query": model.prompts["query"], "document": model.prompts["document"]}
    queries, documents = texts[0::2], texts[1::2]
    with torch.inference_mode():
        q = model.encode(queries, prompt_name="query", batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
        d = model.encode(documents, prompt_name="document", batch_size=8, convert_to_numpy=True, normalize_embeddings=True)
    vectors, purposes = [], []
    for i in range(len(texts)):
        v = q[i // 2] if i % 2 == 0 else d[i // 2]
        vectors.append([float(x) for x in v])
        purposes.append("query" if i % 2 == 0 else "document")
    doc = {
        "model": model_dir.name,
        "versions": {"torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__,
                     "transformers": transformers.__version__},
        "prompts": prompts,
        "texts": texts,
        "purposes": purposes,
        "vectors": vectors,
    }
    partial = out.with_name(out.name + ".partial")
    partial.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    os.replace(partial, out)


if __name__ == "__main__":
    main()
