"""Random convolution, transposed convolution and pooling nodes (1-D, 2-D
and 3-D; strides, dilations, pads, auto_pad, groups, output_padding,
output_shape, ceil_mode, count_include_pad drawn at random) in the node
test layout, each with onnxruntime's output as the expected one; cases
onnxruntime refuses are skipped.

    python tools/onnx/window_fuzz.py OUT [COUNT] [SEED]
    AICF_ONNX_NODE_TESTS=$PWD/OUT cargo test -p aicf-compiler --test compiler \\
        onnx_conformance_table -- --ignored --nocapture

Each case's attributes are in OUT/<case>/attrs.txt. Where onnxruntime and
AICF disagree, `onnx.reference` is a third opinion: for SAME padding with
dilations the two disagree with each other (onnxruntime's output sizes,
the reference's pads from the undilated window) and AICF follows the
spec's formulas (the dilated window in the pads, the output the input over
the stride).
"""
import numpy as np, onnx, os, sys, random
from onnx import helper, TensorProto, numpy_helper
import onnxruntime as ort
out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 200
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 3
rng = np.random.default_rng(seed)
random.seed(seed)
made = 0; tries = 0
while made < count and tries < 25 * count:
    tries += 1
    op = random.choice(["Conv", "ConvTranspose", "MaxPool", "AveragePool"])
    rank = random.choice([1, 2, 2, 3])
    spatial = [random.randint(1, 7) for _ in range(rank)]
    c = random.choice([1, 2, 4]); n = random.choice([1, 2])
    k = [random.randint(1, 4) for _ in range(rank)]
    attrs = {}
    if random.random() < 0.6: attrs["strides"] = [random.randint(1, 3) for _ in range(rank)]
    if random.random() < 0.4: attrs["dilations"] = [random.randint(1, 3) for _ in range(rank)]
    mode = random.random()
    if mode < 0.5: attrs["pads"] = [random.randint(0, 3) for _ in range(2 * rank)]
    elif mode < 0.7: attrs["auto_pad"] = random.choice(["SAME_UPPER", "SAME_LOWER", "VALID"])
    inits = []
    x = rng.standard_normal([n, c] + spatial).astype(np.float32)
    if op in ("Conv", "ConvTranspose"):
        g = random.choice([1, 1, 2]) if c % 2 == 0 else 1
        if g > 1: attrs["group"] = g
        o = random.choice([1, 2, 4])
        if op == "Conv":
            if o % g: continue
            w = rng.standard_normal([o, c // g] + k).astype(np.float32)
        else:
            w = rng.standard_normal([c, o] + k).astype(np.float32)
            if random.random() < 0.3:
                s = attrs.get("strides", [1] * rank); d = attrs.get("dilations", [1] * rank)
                attrs["output_padding"] = [random.randint(0, max(s[i], d[i]) - 1) for i in range(rank)]
            if random.random() < 0.2 and "pads" not in attrs:
                attrs["output_shape"] = [spatial[i] * attrs.get("strides", [1] * rank)[i] + random.randint(-1, 2) for i in range(rank)]
        inits.append(("w", w))
        if random.random() < 0.5:
            nb = w.shape[0] if op == "Conv" else w.shape[1] * attrs.get("group", 1)
            inits.append(("b", rng.standard_normal([nb]).astype(np.float32)))
    else:
        attrs["kernel_shape"] = k
        if random.random() < 0.4: attrs["ceil_mode"] = 1
        if op == "AveragePool" and random.random() < 0.5: attrs["count_include_pad"] = 1
    node = helper.make_node(op, ["x"] + [nm for nm, _ in inits], ["y"], **attrs)
    graph = helper.make_graph([node], "f", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(a, nm) for nm, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9
    try:
        y = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    except Exception:
        continue
    if y.size == 0 or not np.all(np.isfinite(y)): continue
    graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]); model.ir_version = 9
    name = f"test_fz_{made:03d}_{op}{rank}d"
    d = os.path.join(out, name); os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb").write(numpy_helper.from_array(x, "x").SerializeToString())
    open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb").write(numpy_helper.from_array(y, "y").SerializeToString())
    open(os.path.join(d, "attrs.txt"), "w").write(f"{op} x{list(x.shape)} {[(nm, list(a.shape)) for nm, a in inits]} {attrs}\n")
    made += 1
print("made", made, "tries", tries)
