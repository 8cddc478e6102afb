#!/usr/bin/env python3
"""A GGUF file's weights in another tensor type (Q8_0, F16 or F32), its metadata copied as it is: what llama.cpp's
`llama-quantize IN OUT Q8_0` makes of an embedding model, without building llama.cpp. The 2-D weight matrices
(token embeddings included) take the new type; 1-D tensors (norms, biases), position embeddings and token types stay
F32 (as llama-quantize leaves them: llama.cpp adds them to activations as floats); a matrix whose rows are not whole
Q8_0 blocks stays F16. Writes `<out>.partial` and renames, so a killed run never leaves a file that looks
complete.

Usage: gguf_requantize.py IN.gguf OUT.gguf q8_0|f16|f32
"""
import sys
from pathlib import Path

import gguf
import numpy as np

from gguf_write import TYPES, finish, partial_path, put

# Tensors llama.cpp keeps in floats whatever the file's type.
FLOAT = ("position_embd.weight", "token_types.weight")


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in TYPES:
        raise SystemExit(__doc__)
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    qtype, ftype = TYPES[sys.argv[3]]
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(partial_path(out)), arch)
    for key, field in r.fields.items():
        # The writer writes the header's own fields and the architecture itself.
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = field.contents()
        if key == "general.file_type":
            value = int(ftype)
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(key, value, vtype, sub_type=sub)
    for t in r.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        # The reader's shape is innermost first; numpy's is outermost first.
        data = data.reshape([int(d) for d in reversed(t.shape.tolist())])
        put(w, t.name, data, qtype if data.ndim >= 2 and t.name not in FLOAT else gguf.GGMLQuantizationType.F32)
    finish(w, out)


if __name__ == "__main__":
    main()
