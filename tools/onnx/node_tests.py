"""Writes ONNX's own backend node tests (the generators shipped in the
`onnx` package, onnx/backend/test/case/node) as directories of
model.onnx + test_data_set_0/{input,output}_K.pb, the layout of the
`onnx` repository's onnx/backend/test/data/node.

    python tools/onnx/node_tests.py OUT [PATTERN ...]

PATTERN: fnmatch patterns of test names to keep (default: all). The
`backend-test-tools generate-data` command of this onnx release writes only
the model tests, hence this script.
"""
import fnmatch
import os
import shutil
import sys

from onnx import numpy_helper
from onnx.backend.test.case import node


def main() -> None:
    out = sys.argv[1]
    patterns = sys.argv[2:] or ["*"]
    cases = node.collect_testcases(None)
    written = 0
    for case in cases:
        if not any(fnmatch.fnmatch(case.name, p) for p in patterns):
            continue
        d = os.path.join(out, case.name)
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets or []):
            sd = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(sd)
            ok = True
            for kind, values, infos in (("input", inputs, case.model.graph.input),
                                        ("output", outputs, case.model.graph.output)):
                for j, v in enumerate(values):
                    if not infos[j].type.HasField("tensor_type"):
                        ok = False
                        break
                    with open(os.path.join(sd, f"{kind}_{j}.pb"), "wb") as f:
                        t = v if hasattr(v, "SerializeToString") else numpy_helper.from_array(v, infos[j].name)
                        f.write(t.SerializeToString())
            if not ok:
                shutil.rmtree(d)
                break
        else:
            written += 1
    print(f"{written} node tests written to {out}")


if __name__ == "__main__":
    main()
