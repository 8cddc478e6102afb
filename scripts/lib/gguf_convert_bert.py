#!/usr/bin/env python3
"""A sentence-transformers BERT folder (BertModel safetensors in f32, tokenizer.json with a WordPiece model, the
Pooling module) to a GGUF file laid out as llama.cpp's own converter (`convert_hf_to_gguf.py`, its BertModel) lays
it out: architecture `bert`, llama.cpp's tensor names (from the `gguf` package's name map), the vocabulary in
llama.cpp's "phantom space" form (a `##` piece as its bare text, any other normal piece with `▁` in front, special
tokens as they are and of type CONTROL), `[CLS]` as BOS, `[SEP]` as separator, the token-type count and the pooling
type of the Pooling module; 1-D tensors, position embeddings and token types F32 (as llama.cpp keeps them), the
other 2-D weights in the requested type (Q8_0, F16 or F32).

llama.cpp's converter needs torch (gigabytes); this one needs the `gguf` package, numpy and safetensors. It writes
to `<out>.partial` and renames, so a killed run never leaves a file that looks complete.

Usage: gguf_convert_bert.py MODEL_DIR OUT.gguf [q8_0|f16|f32]
"""
import json
from pathlib import Path

import gguf
from safetensors import safe_open

from gguf_write import converter_args, finish, model_writer, put

# Tensors llama.cpp's converter leaves out: the pooler and masked-LM heads are not part of an embedder.
SKIPPED = ("embeddings.position_ids", "pooler.", "cls.")
# Tensors llama.cpp keeps in F32 whatever the file's type.
FLOAT = ("position_embd.weight", "token_types.weight")


def vocab(model_dir: Path, vocab_size: int):
    """Token texts (phantom-space form) and types, and the special ids, from tokenizer.json."""
    tj = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
    if tj["model"]["type"] != "WordPiece":
        raise SystemExit(f"{model_dir}: the tokenizer is {tj['model']['type']}, not WordPiece")
    by_id = {i: t for t, i in tj["model"]["vocab"].items()}
    special = {a["id"]: a["content"] for a in tj.get("added_tokens", []) if a.get("special")}
    T = gguf.TokenType
    tokens, types = [], []
    for i in range(vocab_size):
        text = special.get(i, by_id.get(i, f"[PAD{i}]"))
        if i in special:
            tokens.append(text)
            types.append(T.CONTROL)
        elif i not in by_id:
            tokens.append(text)
            types.append(T.UNUSED)
        else:
            tokens.append(text[2:] if text.startswith("##") else "\u2581" + text)
            types.append(T.NORMAL)
    ids = {t: i for i, t in special.items()}
    normalizer = tj.get("normalizer") or {}
    return tokens, types, ids, normalizer


def pooling_type(model_dir: Path):
    path = "1_Pooling"
    modules = model_dir / "modules.json"
    if modules.is_file():
        for m in json.loads(modules.read_text(encoding="utf-8")):
            if m["type"].endswith("Pooling"):
                path = m["path"]
    conf = json.loads((model_dir / path / "config.json").read_text(encoding="utf-8"))
    if conf.get("pooling_mode_mean_tokens"):
        return gguf.PoolingType.MEAN
    if conf.get("pooling_mode_cls_token"):
        return gguf.PoolingType.CLS
    raise SystemExit(f"{model_dir / path}: only mean and [CLS] pooling are written")


def main():
    model_dir, out, qtype, ftype, hp = converter_args(__doc__)
    if hp.get("model_type") != "bert":
        raise SystemExit(f"{model_dir}: not a BERT model ({hp.get('model_type')})")
    arch = gguf.MODEL_ARCH.BERT
    names = gguf.get_tensor_name_map(arch, hp["num_hidden_layers"])
    w = model_writer(out, arch, model_dir.name, ftype, hp, hp["max_position_embeddings"])
    w.add_layer_norm_eps(hp.get("layer_norm_eps", 1e-12))
    w.add_causal_attention(False)
    w.add_pooling_type(pooling_type(model_dir))

    tokens, types, ids, normalizer = vocab(model_dir, hp["vocab_size"])
    w.add_token_type_count(hp.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    for name, add in (("[CLS]", w.add_bos_token_id), ("[SEP]", w.add_sep_token_id), ("[UNK]", w.add_unk_token_id),
                      ("[PAD]", w.add_pad_token_id), ("[MASK]", w.add_mask_token_id)):
        if name in ids:
            add(ids[name])
    if normalizer.get("type") == "BertNormalizer" and not normalizer.get("lowercase", True):
        w.add_bool("tokenizer.ggml.normalizer.lowercase", False)

    with safe_open(str(model_dir / "model.safetensors"), "np") as f:
        for hf_name in sorted(f.keys()):
            name = hf_name[5:] if hf_name.startswith("bert.") else hf_name
            if name.startswith(SKIPPED):
                continue
            gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise SystemExit(f"tensor {hf_name} has no llama.cpp name")
            data = f.get_tensor(hf_name)
            put(w, gguf_name, data, qtype if data.ndim >= 2 and gguf_name not in FLOAT else gguf.GGMLQuantizationType.F32)
    finish(w, out)


if __name__ == "__main__":
    main()
