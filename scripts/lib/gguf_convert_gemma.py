#!/usr/bin/env python3
"""EmbeddingGemma (a sentence-transformers folder: Gemma3TextModel safetensors, 2_Dense, 3_Dense, tokenizer.model)
to a GGUF file laid out as llama.cpp's own converter (`convert_hf_to_gguf.py --sentence-transformers-dense-modules`)
lays it out: architecture `gemma-embedding`, llama.cpp's tensor names (from the `gguf` package's name map), the
SentencePiece vocabulary with scores and token types (`tokenizer.ggml.*`), the two dense projections as `dense_2` /
`dense_3` with their `*_feat_in` / `*_feat_out` keys, mean pooling, norms shifted by one (Gemma's RMSNorm multiplies
by 1 + weight) and kept F32 with every 1-D tensor, the 2-D weights in the requested type (Q8_0, F16 or F32).

llama.cpp's converter needs torch (gigabytes); this one needs the `gguf` package, numpy, safetensors and
sentencepiece. It writes to `<out>.partial` and renames, so a killed run never leaves a file that looks complete.

Usage: gguf_convert_gemma.py MODEL_DIR OUT.gguf [q8_0|f16|f32]
"""
import json
from pathlib import Path

import gguf
import numpy as np
from safetensors import safe_open
from sentencepiece import SentencePieceProcessor

from gguf_write import converter_args, finish, model_writer, put


def vocab(model_dir: Path, vocab_size: int):
    """Pieces, scores and token types of tokenizer.model, padded to the model's vocabulary, with the special tokens
    of tokenizer_config.json marked as llama.cpp marks them."""
    sp = SentencePieceProcessor()
    sp.LoadFromFile(str(model_dir / "tokenizer.model"))
    T = gguf.TokenType
    tokens = [f"[PAD{i}]".encode() for i in range(vocab_size)]
    scores = [-10000.0] * vocab_size
    types = [T.UNUSED] * vocab_size
    for i in range(min(sp.vocab_size(), vocab_size)):
        tokens[i] = sp.IdToPiece(i).encode("utf-8")
        scores[i] = sp.GetScore(i)
        if sp.IsUnknown(i):
            types[i] = T.UNKNOWN
        elif sp.IsControl(i):
            types[i] = T.CONTROL
        elif sp.IsUnused(i):
            types[i] = T.UNUSED
        elif sp.IsByte(i):
            types[i] = T.BYTE
        else:
            types[i] = T.NORMAL
    added = model_dir / "added_tokens.json"
    if added.is_file():
        for text, i in json.loads(added.read_text(encoding="utf-8")).items():
            if i < vocab_size:
                tokens[i], scores[i], types[i] = text.encode("utf-8"), -1000.0, T.USER_DEFINED
    config = model_dir / "tokenizer_config.json"
    if config.is_file():
        decoder = json.loads(config.read_text(encoding="utf-8")).get("added_tokens_decoder", {})
        for i, data in decoder.items():
            i = int(i)
            if i >= vocab_size:
                continue
            text = data["content"]
            looks_special = text.startswith("<") and text.endswith(">") or text.startswith("[") and text.endswith("]")
            if data.get("special") or looks_special:
                types[i] = T.CONTROL
            else:
                text = text.replace("\u2581", " ")
                types[i] = T.USER_DEFINED
            scores[i] = -1000.0
            tokens[i] = text.encode("utf-8")
    return tokens, scores, types


def dense_modules(model_dir: Path):
    """(gguf name, in, out, weight) of each sentence-transformers Dense module, in modules.json order."""
    out = []
    modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    for m in modules:
        if not m["type"].endswith("Dense"):
            continue
        path = model_dir / m["path"]
        conf = json.loads((path / "config.json").read_text(encoding="utf-8"))
        if conf.get("bias"):
            raise SystemExit(f"{path}: a Dense module with a bias is not part of llama.cpp's layout")
        name = "dense_2" if m["path"] == "2_Dense" else "dense_3"
        with safe_open(str(path / "model.safetensors"), "np") as f:
            w = f.get_tensor("linear.weight").astype(np.float32)
        if w.shape != (conf["out_features"], conf["in_features"]):
            raise SystemExit(f"{path}: weight {w.shape} does not match its config")
        out.append((name, conf["in_features"], conf["out_features"], w))
    return out


def main():
    model_dir, out, qtype, ftype, hp = converter_args(__doc__)
    if hp.get("architectures") != ["Gemma3TextModel"]:
        raise SystemExit(f"{model_dir}: not a Gemma3TextModel ({hp.get('architectures')})")
    arch = gguf.MODEL_ARCH.GEMMA_EMBEDDING
    names = gguf.get_tensor_name_map(arch, hp["num_hidden_layers"])
    name = model_dir.name if model_dir.name != "model_download" else "embeddinggemma-300m"
    w = model_writer(out, arch, name, ftype, hp, hp.get("max_position_embeddings", 2048))
    w.add_head_count_kv(hp.get("num_key_value_heads", hp["num_attention_heads"]))
    w.add_layer_norm_rms_eps(hp.get("rms_norm_eps", 1e-6))
    w.add_key_length(hp.get("head_dim", 256))
    w.add_value_length(hp.get("head_dim", 256))
    w.add_rope_freq_base(hp.get("rope_theta", 1_000_000.0))
    if (local := hp.get("rope_local_base_freq")) is not None:
        w.add_rope_freq_base_swa(local)
    # The window of the original config.json, as llama.cpp's converter writes it (not transformers' adjusted one).
    w.add_sliding_window(hp["sliding_window"])
    dense = dense_modules(model_dir)
    for name, fin, fout, _ in dense:
        w.add_dense_features_dims(name, fin, fout)
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text(encoding="utf-8"))
    if not pooling.get("pooling_mode_mean_tokens"):
        raise SystemExit("only mean pooling is written (EmbeddingGemma's)")
    w.add_pooling_type(gguf.PoolingType.MEAN)

    tokens, scores, types = vocab(model_dir, hp["vocab_size"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    gguf.SpecialVocab(model_dir, n_vocab=len(tokens)).add_to_gguf(w)
    w.add_add_space_prefix(False)

    def put_weight(gguf_name: str, data: np.ndarray):
        """Norms and other 1-D tensors in F32, as llama.cpp keeps them."""
        float_only = data.ndim <= 1 or gguf_name.endswith("_norm.weight")
        put(w, gguf_name, data, gguf.GGMLQuantizationType.F32 if float_only else qtype)

    with safe_open(str(model_dir / "model.safetensors"), "np") as f:
        for hf_name in sorted(f.keys()):
            gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
            if gguf_name is None:
                raise SystemExit(f"tensor {hf_name} has no llama.cpp name")
            data = f.get_tensor(hf_name)
            if hf_name.endswith("norm.weight"):
                data = data.astype(np.float32) + 1.0
            if hf_name == "embed_tokens.weight":
                data = data[: len(tokens)]
            put_weight(gguf_name, data)
    for name, _, _, weight in dense:
        put_weight(f"{name}.weight", weight)
    finish(w, out)


if __name__ == "__main__":
    main()
