#!/usr/bin/env python3
"""Runs the models `aicf export` wrote in DIR with onnxruntime.

For each DIR/<stem>.onnx: `onnx.checker.check_model(full_check=True)` (which
runs ONNX's shape inference), then, for each batch b written beside it, the
inputs <stem>.b<b>.in<i>.npy against the reference interpreter's outputs
<stem>.b<b>.out<i>.npy. Prints one line a model and batch; exits 1 on any
disagreement beyond 2e-5 of the largest magnitude (f32 sums in another
order).

    python tools/onnx/check_export.py target/onnx-export-check
"""
import glob
import os
import re
import sys

import numpy as np
import onnx
import onnxruntime as ort

TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(bool)": np.bool_,
    "tensor(float16)": np.float16,
}


def main(directory):
    failed = 0
    models = sorted(glob.glob(os.path.join(directory, "*.onnx")))
    if not models:
        print(f"{directory}: no .onnx files", file=sys.stderr)
        return 1
    for path in models:
        stem = path[: -len(".onnx")]
        onnx.checker.check_model(onnx.load(path), full_check=True)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = session.get_inputs()
        batches = sorted({int(m.group(1)) for f in glob.glob(stem + ".b*.in0.npy")
                          for m in [re.search(r"\.b(\d+)\.in0\.npy$", f)] if m})
        for b in batches:
            inputs = {
                x.name: np.load(f"{stem}.b{b}.in{i}.npy").astype(TYPES[x.type])
                for i, x in enumerate(feeds)
            }
            got = session.run(None, inputs)
            worst = 0.0
            for i, g in enumerate(got):
                want = np.load(f"{stem}.b{b}.out{i}.npy")
                if g.shape != want.shape:
                    print(f"FAIL {os.path.basename(stem)} batch {b} output {i}: shape {g.shape}, want {want.shape}")
                    failed += 1
                    continue
                scale = max(1.0, float(np.abs(want).max()) if want.size else 1.0)
                err = float(np.abs(g.astype(np.float64) - want).max()) / scale if want.size else 0.0
                worst = max(worst, err)
            ok = worst <= 2e-5
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {os.path.basename(stem)} batch {b}: {len(got)} outputs, "
                  f"largest difference {worst:.2e} of the largest magnitude")
    print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}: {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
