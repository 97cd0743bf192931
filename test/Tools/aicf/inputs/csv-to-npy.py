"""Writes columns of a CSV table as a float32 .npy array without numpy
(the lit tests' Python has none): csv-to-npy.py TABLE OUT.npy FIRST LAST
[DIVISOR [SHAPE]] takes columns FIRST..LAST (from 0, inclusive) of every row,
divided by DIVISOR (default 1), each row shaped SHAPE (`1,8,8`: an array of
[rows, 1, 8, 8]; default: the columns)."""
import struct
import sys

table, out, first, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
divisor = float(sys.argv[5]) if len(sys.argv) > 5 else 1.0
rows = [[float(v) / divisor for v in line.split(",")[first:last + 1]] for line in open(table) if line.strip()]
cols = last - first + 1
shape = sys.argv[6] if len(sys.argv) > 6 else str(cols)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %s), }" % (len(rows), shape)
# The header is padded with spaces to a multiple of 64 bytes with the magic.
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open(out, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    for r in rows:
        f.write(struct.pack("<%df" % cols, *r))
