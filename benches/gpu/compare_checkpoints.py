#!/usr/bin/env python3
"""Largest difference between two checkpoints' tensors (safetensors, same
names and shapes); exits 1 above the bound (default 1e-5).

    python3 benches/gpu/compare_checkpoints.py a.safetensors b.safetensors [bound]
"""
import array
import json
import struct
import sys

TYPES = {"F32": "f", "F64": "d", "I32": "i", "I64": "q"}


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        values = array.array(TYPES[entry["dtype"]])
        values.frombytes(body[start:end])
        tensors[name] = (entry["shape"], values)
    return tensors


def main():
    a, b = load(sys.argv[1]), load(sys.argv[2])
    bound = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-5
    if sorted(a) != sorted(b):
        print(f"different tensors: {sorted(set(a) ^ set(b))}")
        return 1
    worst, where = 0.0, ""
    for name, (shape, x) in a.items():
        if b[name][0] != shape:
            print(f"{name}: shape {shape} against {b[name][0]}")
            return 1
        for u, v in zip(x, b[name][1]):
            if abs(u - v) > worst:
                worst, where = abs(u - v), name
    print(f"largest difference {worst:.3g} ({where or 'none'}), bound {bound:g}: {'ok' if worst <= bound else 'FAIL'}")
    return 0 if worst <= bound else 1


if __name__ == "__main__":
    sys.exit(main())
