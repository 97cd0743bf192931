"""Prints how many tensors of safetensors file A differ from B's, in bytes,
of how many (their metadata is not compared: it names the run's registry
row, its paths). Names after the two files are left out (`step`)."""
import json
import struct
import sys


def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8 : 8 + n])
    header.pop("__metadata__", None)
    data = b[8 + n :]
    return {k: data[v["data_offsets"][0] : v["data_offsets"][1]] for k, v in header.items()}


a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
for name in sys.argv[3:]:
    a.pop(name, None)
    b.pop(name, None)
assert a.keys() == b.keys(), (sorted(a), sorted(b))
print(f"{sum(a[k] != b[k] for k in a)} of {len(a)} tensors differ")
