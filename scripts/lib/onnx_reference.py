#!/usr/bin/env python3
"""Reference outputs of an int8 ONNX BERT model, computed by onnxruntime on the original file, for the test that
checks the converted float model (crates/model-runtime/tests/converted_models.rs).

Usage: onnx_reference.py embed|rerank MODEL.onnx TOKENIZER.json OUT.json
       onnx_reference.py colbert MODEL.onnx TOKENIZER.json ARTIFACT.metadata OUT.json
- embed: [CLS] vectors (L2-normalised) of generated texts: {"texts": [...], "vectors": [[...], ...]}
- rerank: logits of (query, passage) pairs: {"pairs": [[q, p], ...], "logits": [...]}
- colbert: token vectors of queries and passages encoded as the late-interaction reranker encodes them (the
  conventions of ARTIFACT.metadata; model_runtime::LateEncoder), and MaxSim of (query, passage) pairs:
  {"texts": [{"text", "query", "ids", "vectors"}], "pairs": [[query index, passage index, maxsim], ...]}
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
# (model_runtime::MAX_PAIR_TOKENS): the reference is truncated alike.
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


def colbert(sess, tok, meta, dest):
    """Token vectors as model_runtime::LateEncoder computes them, with the conventions `meta` holds (ColBERT's
    defaults where a key is absent)."""
    tok.no_padding()
    tok.no_truncation()
    vocab = tok.get_vocab()
    cls, sep, mask = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
    q_marker = meta.get("query_token_id", "[unused0]")
    d_marker = meta.get("doc_token_id", "[unused1]")
    q_len = meta.get("query_maxlen") or 32
    d_len = min(meta.get("doc_maxlen") or 180, 512)
    augment = meta.get("query_augmentation", True)
    mask_punct = meta.get("mask_punctuation", True)
    skip_specials = meta.get("skip_query_specials", False)
    punct = {vocab[c] for c in "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" if c in vocab}
    dim = meta.get("dim")

    def encode(text, query):
        words = tok.encode(text, add_special_tokens=False).ids
        ids = [cls] + ([vocab[q_marker if query else d_marker]] if (q_marker if query else d_marker) else [])
        first = len(ids)
        ids += words[: max((q_len if query else d_len) - len(ids) - 1, 0)]
        last = len(ids)
        ids.append(sep)
        if query:
            keep = [not skip_specials or (first <= i < last and not (mask_punct and t in punct)) for i, t in enumerate(ids)]
            if augment:
                keep += [True] * max(q_len - len(ids), 0)
                ids += [mask] * max(q_len - len(ids), 0)
        else:
            keep = [not (mask_punct and t in punct) for t in ids]
        feed = {"input_ids": np.array([ids], dtype=np.int64), "attention_mask": np.ones((1, len(ids)), dtype=np.int64),
                "token_type_ids": np.zeros((1, len(ids)), dtype=np.int64)}
        names = {i.name for i in sess.get_inputs()}
        hidden = sess.run(None, {k: v for k, v in feed.items() if k in names})[0][0].astype(np.float64)
        rows = hidden[np.array(keep)][:, : dim or hidden.shape[1]]
        rows = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return ids, rows

    t = texts(60, seed=5)
    queries = [f"What {x.split(' ', 2)[1]} {x.split(' ')[0].lower()}?" if i % 2 else x[:50] for i, x in enumerate(t[:20])]
    queries.append("why " * 40)  # longer than a query may be: cut
    passages = t[20:]
    out, vecs = [], []
    for text, query in [(q, True) for q in queries] + [(p, False) for p in passages]:
        ids, rows = encode(text, query)
        out.append({"text": text, "query": query, "ids": ids, "vectors": rows.tolist()})
        vecs.append(rows)
    pairs = []
    for qi in range(len(queries)):
        for k in range(3):
            pi = len(queries) + (qi * 7 + k * 13) % len(passages)
            pairs.append([qi, pi, float((vecs[qi] @ vecs[pi].T).max(axis=1).sum())])
    json.dump({"texts": out, "pairs": pairs}, open(dest, "w"))


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
    elif mode == "colbert":
        metadata, out = sys.argv[4:6]
        colbert(sess, tok, json.load(open(metadata)), out)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
