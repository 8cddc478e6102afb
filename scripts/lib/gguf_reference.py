#!/usr/bin/env python3
"""Reference outputs of llama.cpp on a GGUF embedding model, for the local provider's tests: each text's token ids
(llama-tokenize) and its embedding (llama-embedding, the file's own pooling, L2-normalised), the even-numbered
texts as queries and the odd ones as documents with the model's prompts in front.

Run once by hand with a llama.cpp build (the one inside PyPI's llama-cpp-python sdist, vendor/llama.cpp, built
with cmake: `cmake --build build --target llama-embedding llama-tokenize`); its outputs are committed as test data
(crates/model-runtime/tests/data/), so the tests need no llama.cpp.

Usage: gguf_reference.py LLAMA_BIN_DIR MODEL.gguf TEXTS.txt QUERY_PROMPT DOCUMENT_PROMPT OUT_PREFIX
Writes OUT_PREFIX.tokens.json (a list of token-id lists) and OUT_PREFIX.vectors.i8 (per text: f32 scale, then
one int8 per dimension; value = int8 * scale).
"""
import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path


def main():
    bin_dir, model, texts_path, qp, dp, out = sys.argv[1:7]
    texts = [l for l in Path(texts_path).read_text(encoding="utf-8").split("\n") if l.strip()]
    prompted = [(qp if i % 2 == 0 else dp) + t for i, t in enumerate(texts)]
    tokens = []
    for t in prompted:
        r = subprocess.run([f"{bin_dir}/llama-tokenize", "-m", model, "--ids", "--log-disable", "-p", t],
                           capture_output=True, text=True, check=True)
        tokens.append(json.loads(r.stdout.strip().splitlines()[-1]))
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as f:
        f.write("\n".join(prompted))
        prompts_file = f.name
    r = subprocess.run([f"{bin_dir}/llama-embedding", "-m", model, "-f", prompts_file, "--embd-output-format", "json",
                        "--embd-normalize", "2", "-t", "2", "-c", "8192", "-b", "8192", "-ub", "8192"],
                       capture_output=True, text=True, check=True)
    data = json.loads(r.stdout)["data"]
    assert len(data) == len(texts), (len(data), len(texts))
    with open(out + ".vectors.i8", "wb") as f:
        for d in data:
            v = d["embedding"]
            scale = max(abs(x) for x in v) / 127.0 or 1.0
            f.write(struct.pack("<f", scale))
            f.write(bytes((round(x / scale) & 0xFF) for x in v))
    Path(out + ".tokens.json").write_text(json.dumps(tokens, separators=(",", ":")) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
