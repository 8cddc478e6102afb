"""What the GGUF writers of scripts/lib share (gguf_convert_bert.py, gguf_convert_gemma.py, gguf_requantize.py): the
tensor types they write, a model's common header keys, one tensor put in a type, and the file written to
`<out>.partial` and renamed at the end, so a killed run never leaves a file that looks complete.
Needs PyPI's `gguf` and numpy.
"""
import json
import os
import sys
from pathlib import Path

import gguf
import numpy as np

# The file types a converter is asked for: the type of its 2-D weights, and the file type the header records.
TYPES = {
    "q8_0": (gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q8_0),
    "f16": (gguf.GGMLQuantizationType.F16, gguf.LlamaFileType.MOSTLY_F16),
    "f32": (gguf.GGMLQuantizationType.F32, gguf.LlamaFileType.ALL_F32),
}


def converter_args(usage: str):
    """A converter's command line, `MODEL_DIR OUT.gguf [q8_0|f16|f32]` (Q8_0 when the type is left out):
    `(model_dir, out, weight type, file type, MODEL_DIR's config.json)`; the usage text otherwise."""
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] not in TYPES):
        raise SystemExit(usage)
    model_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    qtype, ftype = TYPES[sys.argv[3] if len(sys.argv) == 4 else "q8_0"]
    hp = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return model_dir, out, qtype, ftype, hp


def partial_path(out: Path) -> Path:
    return out.with_name(out.name + ".partial")


def model_writer(out: Path, arch, name: str, ftype, hp: dict, context_length: int) -> gguf.GGUFWriter:
    """A writer to `<out>.partial` for architecture `arch` (a `gguf.MODEL_ARCH`), with the keys every converted
    model starts with, in llama.cpp's converter's order: type, name, file type, quantization version, then the
    block count, context, embedding and feed-forward widths and head count of the transformers config `hp`."""
    w = gguf.GGUFWriter(str(partial_path(out)), gguf.MODEL_ARCH_NAMES[arch])
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    w.add_file_type(ftype)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(context_length)
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    return w


def put(w: gguf.GGUFWriter, name: str, data: np.ndarray, qtype) -> None:
    """`data` as tensor `name` in type `qtype`, or F16 where its rows are not whole blocks of that type."""
    data = np.asarray(data, dtype=np.float32)
    try:
        q = gguf.quants.quantize(data, qtype)
    except gguf.QuantError:
        qtype = gguf.GGMLQuantizationType.F16
        q = gguf.quants.quantize(data, qtype)
    w.add_tensor(name, q, raw_dtype=qtype)


def finish(w: gguf.GGUFWriter, out: Path) -> None:
    """Write the header, the metadata and the tensors, then rename `<out>.partial` to `out`."""
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    os.replace(partial_path(out), out)
