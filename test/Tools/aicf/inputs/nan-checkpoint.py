"""Writes a copy of a safetensors checkpoint whose fc1.weight starts with
a NaN. Its CRC-32 in the metadata (aicf.crc32), and the metadata's own
(aicf.metadata.crc32: of the other entries as compact JSON in key order),
are updated to match, as a tool that edits tensors would do, unless
--keep-checksum (then the bytes no longer match their checksum).

    nan-checkpoint.py IN OUT [--keep-checksum]
"""
import json
import struct
import sys
import zlib

src, dst = sys.argv[1], sys.argv[2]
keep = "--keep-checksum" in sys.argv[3:]
data = open(src, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
lo, hi = header["fc1.weight"]["data_offsets"]
body = bytearray(data[8 + n:])
body[lo:lo + 4] = struct.pack("<f", float("nan"))
meta = header.get("__metadata__", {})
if not keep and "aicf.crc32" in meta:
    sums = json.loads(meta["aicf.crc32"])
    sums["fc1.weight"] = "%08x" % zlib.crc32(bytes(body[lo:hi]))
    meta["aicf.crc32"] = json.dumps(sums, separators=(",", ":"))
    if "aicf.metadata.crc32" in meta:
        others = {k: v for k, v in sorted(meta.items()) if k != "aicf.metadata.crc32"}
        text = json.dumps(others, separators=(",", ":"), ensure_ascii=False).encode()
        meta["aicf.metadata.crc32"] = "%08x" % zlib.crc32(text)
    header["__metadata__"] = meta
text = json.dumps(header, separators=(",", ":")).encode()
open(dst, "wb").write(struct.pack("<Q", len(text)) + text + bytes(body))
