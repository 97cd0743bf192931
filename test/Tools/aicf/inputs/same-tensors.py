#!/usr/bin/env python3
"""Whether two safetensors files hold the same tensors, bit for bit (names,
types, shapes and bytes), whatever their metadata says (timings differ from
run to run). Prints `same N tensors`, or each difference and exits 1.
Standard library only: the format is an 8-byte header length, a JSON
header, then the data."""
import json
import struct
import sys


def tensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {
        name: (t["dtype"], t["shape"], data[t["data_offsets"][0] : t["data_offsets"][1]])
        for name, t in header.items()
    }


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
differences = [name for name in sorted(set(a) | set(b)) if a.get(name) != b.get(name)]
for name in differences:
    print(f"differs: {name}")
if differences:
    sys.exit(1)
print(f"same {len(a)} tensors")
