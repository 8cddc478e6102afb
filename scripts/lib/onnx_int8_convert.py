#!/usr/bin/env python3
"""Convert a dynamically quantised (int8) BERT ONNX export to float safetensors the `local` provider loads.

Usage: onnx_int8_convert.py MODEL.onnx OUT_DIR

- Each `MatMulInteger` whose weight is an initializer: transposed from ONNX's [in, out] to a Linear layer's
  [out, in] and named after the bias of the `Add` its output flows into (`...dense.bias` -> `...dense.weight`).
  Symmetric int8 weights (zero point 0, the dynamic quantiser's default) stay int8 (`I8`) with their scale as
  `...dense.weight_scale` (F32, one per output; a scalar scale repeated); the provider runs them with an int8
  kernel, or dequantises them where the CPU has none. Other weights: float = (q - zero_point) x scale.
- Each quantised embedding (`X.weight_quantized` read by `DequantizeLinear`) dequantised the same way as `X.weight`.
- Every other float initializer whose name is a model path (LayerNorm weights, biases) is copied as is.
Writes `model.safetensors` (F32 and I8, little-endian) into OUT_DIR; nothing else (the caller adds the configs).
Needs `onnx` and `numpy`.
"""
import json
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def dequantize(q, scale, zero_point):
    return (q.astype(np.float32) - zero_point.astype(np.float32)) * scale.astype(np.float32)


def convert(model_path):
    graph = onnx.load(model_path).graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumers = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def bias_after(output):
        """The bias initializer of the first Add reached from `output` through Cast / Mul nodes."""
        frontier = [output]
        for _ in range(6):
            nxt = []
            for t in frontier:
                for node in consumers.get(t, []):
                    if node.op_type == "Add":
                        for i in node.input:
                            if i in inits and i.endswith(".bias"):
                                return i
                    if node.op_type in ("Cast", "Mul", "Add"):
                        nxt.extend(node.output)
            frontier = nxt
        return None

    tensors = {}
    for node in graph.node:
        if node.op_type == "MatMulInteger" and node.input[1] in inits:
            q = inits[node.input[1]]
            zp = inits[node.input[3]] if len(node.input) > 3 and node.input[3] in inits else np.zeros((), q.dtype)
            scale_name = node.input[1].replace("_quantized", "_scale")
            if scale_name not in inits:
                raise SystemExit(f"no scale {scale_name} for {node.name}")
            scale = inits[scale_name].astype(np.float32)
            bias = bias_after(node.output[0])
            if bias is None:
                raise SystemExit(f"no bias after {node.name}: cannot name its weight")
            name = bias[: -len(".bias")] + ".weight"
            if q.dtype == np.int8 and not np.any(zp):
                # Symmetric int8 (zero point 0): kept as published, one scale per output column.
                tensors[name] = np.ascontiguousarray(q.T)
                tensors[name + "_scale"] = np.ascontiguousarray(np.broadcast_to(scale, (q.shape[1],)))
            else:
                tensors[name] = np.ascontiguousarray(dequantize(q, scale, zp).T)  # [in, out] -> [out, in]
        elif node.op_type == "DequantizeLinear" and node.input[0] not in inits:
            # A quantised embedding table, gathered then dequantised: find the Gather that reads the table.
            src = next((n for n in graph.node if node.input[0] in n.output), None)
            if src is None or src.op_type != "Gather" or src.input[0] not in inits:
                continue
            table = src.input[0]
            name = table[: -len("_quantized")] if table.endswith("_quantized") else table
            tensors[name] = dequantize(inits[table], inits[node.input[1]], inits[node.input[2]] if len(node.input) > 2 else np.zeros((), np.int8))
    for name, value in inits.items():
        if name in tensors or name.startswith("onnx::") or name.startswith("/"):
            continue
        if name.endswith(("_quantized", "_scale", "_zero_point")):
            continue
        if value.dtype == np.float32 and value.ndim >= 1:
            tensors[name] = value
    return tensors


def write_safetensors(tensors, path):
    header = {}
    offset = 0
    blobs = []
    for name in sorted(tensors):
        kind = "I8" if tensors[name].dtype == np.int8 else "F32"
        arr = np.ascontiguousarray(tensors[name], dtype="i1" if kind == "I8" else "<f4")
        data = arr.tobytes()
        header[name] = {"dtype": kind, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    tmp = path + ".partial"
    with open(tmp, "wb") as out:
        out.write(struct.pack("<Q", len(head)))
        out.write(head)
        for b in blobs:
            out.write(b)
    os.replace(tmp, path)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    model, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    tensors = convert(model)
    if not any(k.endswith("word_embeddings.weight") for k in tensors):
        raise SystemExit("no word embeddings found: not a BERT export this converter knows")
    write_safetensors(tensors, os.path.join(out, "model.safetensors"))
    print(f"{len(tensors)} tensors -> {out}/model.safetensors", file=sys.stderr)


if __name__ == "__main__":
    main()
