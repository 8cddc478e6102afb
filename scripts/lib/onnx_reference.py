#!/usr/bin/env python3
"""Reference outputs of an int8 ONNX BERT model, computed by onnxruntime on the original file, for the test that
checks the converted float model (crates/providers/tests/converted_models.rs).

Usage: onnx_reference.py embed|rerank MODEL.onnx TOKENIZER.json OUT.json
- embed: [CLS] vectors (L2-normalised) of generated texts: {"texts": [...], "vectors": [[...], ...]}
- rerank: logits of (query, passage) pairs: {"pairs": [[q, p], ...], "logits": [...]}
Needs onnxruntime, numpy and tokenizers.
"""
import json
import random
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

SUBJECTS = ["The gateway", "Our deploy pipeline", "Caroline", "The hiking club", "A small dog", "The database",
            "My sister", "The quarterly budget", "This recipe", "The new intern", "The canary cluster", "Grandma"]
VERBS = ["runs on", "was moved to", "depends on", "talked about", "painted", "forgot", "is scheduled for",
         "keeps failing on", "really enjoyed", "was replaced by", "goes through", "adopted"]
OBJECTS = ["a Mac Studio in the office", "the Kubernetes staging cluster", "adoption agencies last week",
           "a sunrise over the lake", "port 8443 with TLS", "the March release", "pottery classes on Sundays",
           "error E4012 during sync", "the camping trip in July", "a vegan lasagna", "LGBTQ support groups",
           "the backup job at 3 am"]


def texts(n, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
        if i % 3 == 0:
            s += f" {rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}."
        if i % 17 == 0:
            s = " ".join([s] * 30)  # long enough to be truncated at 512 tokens
        out.append(s)
    return out


# The local reranker reads at most this many tokens of a (query, passage) pair, the passage giving way
# (providers::local::MAX_PAIR_TOKENS): the reference is truncated alike.
MAX_PAIR_TOKENS = 192


def encode(tok, items, pair=False):
    if pair:
        tok.enable_truncation(MAX_PAIR_TOKENS, strategy="only_second")
    else:
        tok.enable_truncation(512)
    tok.no_padding()
    enc = tok.encode_batch(items) if not pair else tok.encode_batch([tuple(p) for p in items])
    return enc


def run(sess, enc):
    out = []
    for e in enc:
        feed = {
            "input_ids": np.array([e.ids], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids], dtype=np.int64),
        }
        names = {i.name for i in sess.get_inputs()}
        out.append(sess.run(None, {k: v for k, v in feed.items() if k in names})[0][0])
    return out


def main():
    mode, model, tokenizer, dest = sys.argv[1:5]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    tok = Tokenizer.from_file(tokenizer)
    if mode == "embed":
        items = texts(300)
        vecs = []
        for h in run(sess, encode(tok, items)):
            v = h[0].astype(np.float64)
            vecs.append((v / np.linalg.norm(v)).tolist())
        json.dump({"texts": items, "vectors": vecs}, open(dest, "w"))
    elif mode == "rerank":
        t = texts(200, seed=11)
        pairs = [[f"What {t[i].split(' ', 2)[1]} {t[i].split(' ')[0].lower()}?" if i % 2 else t[i][:40], t[(i * 7) % len(t)]] for i in range(200)]
        logits = [float(h[0]) for h in run(sess, encode(tok, pairs, pair=True))]
        json.dump({"pairs": pairs, "logits": logits}, open(dest, "w"))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
