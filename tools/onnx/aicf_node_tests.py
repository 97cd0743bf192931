"""Node tests of cases ONNX's own generators do not cover, in their layout
(model.onnx + test_data_set_0/{input,output}_0.pb), the expected outputs
from onnx's reference evaluator: 1-D convolutions (strided and padded;
grouped, dilated and SAME-padded); transposed convolutions in 1-D,
grouped, with uneven pads and from output_shape; 2-D convolutions with
uneven padding; pooling in 1-D, dilated, with uneven pads, ceil_mode and
count_include_pad=0; opset 23's Attention under constant masks that
broadcast ([keys], [B, 1, 1, keys], [1, H, 1, keys] with is_causal, whose
expected output is computed here: the evaluator drops the causal triangle
there); GroupNormalization at opset 18 (scale and bias per group) and 21
(per channel, over a 1-D input); 3-D convolutions (strided and padded; grouped,
dilated and SAME-padded; depth taps wholly in the padding), 3-D transposed convolutions (strided with
output_padding and uneven pads; grouped, to an output_shape) and 3-D
pooling with uneven pads and ceil_mode.

    python tools/onnx/aicf_node_tests.py OUT     # test/onnx/node
"""
import numpy as np, onnx, os, sys
from onnx import helper, TensorProto, numpy_helper
from onnx.reference import ReferenceEvaluator
out = sys.argv[1]
rng = np.random.default_rng(7)
def case(name, cin, cout, length, k, attrs, group=1):
    x = rng.standard_normal((2, cin, length)).astype(np.float32)
    w = rng.standard_normal((cout, cin // group, k)).astype(np.float32)
    b = rng.standard_normal((cout,)).astype(np.float32)
    node_case(name, "Conv", x, [("w", w), ("b", b)], dict(group=group, **attrs))
def node_case(name, op, x, inits, attrs, opset=17, ort=False, expected=None, check=True):
    """One node `op` of the input `x` and the initializers `inits` ((name, array) pairs); the
    expected output from onnx's reference evaluator, or with `ort` from onnxruntime (the
    evaluator's grouped ConvTranspose splits the weight by output channels, onnx 1.23), or
    `expected` (where the evaluator is wrong, or, without `check`, where onnx 1.23 deprecates the op's
    version: GroupNormalization-18)."""
    node = helper.make_node(op, ["x"] + [n for n, _ in inits], ["y"], **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(a, n) for n, a in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if expected is not None:
        y = expected
    elif ort:
        import onnxruntime
        sess = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        y = sess.run(None, {"x": x})[0]
    else:
        y = ReferenceEvaluator(model).run(None, {"x": x})[0]
    graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if check:
        onnx.checker.check_model(model)
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "y").SerializeToString())
    print(name, x.shape, y.shape)
case("test_aicf_conv1d_strided_padded", 3, 4, 9, 3, dict(strides=[2], pads=[1, 1]))
case("test_aicf_conv1d_grouped_dilated_same", 4, 6, 10, 3, dict(dilations=[2], auto_pad="SAME_UPPER"), group=2)
def transposed(name, x_shape, w_shape, attrs, ort=False):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal((w_shape[1] * attrs.get("group", 1),)).astype(np.float32)
    node_case(name, "ConvTranspose", x, [("w", w), ("b", b)], attrs, ort=ort)
transposed("test_aicf_convtranspose1d_strided_output_padding", (2, 3, 7), (3, 4, 3),
           dict(strides=[2], pads=[1, 0], output_padding=[1]))
transposed("test_aicf_convtranspose_grouped_uneven_pads", (2, 4, 5, 4), (4, 3, 3, 2),
           dict(group=2, strides=[2, 3], pads=[0, 1, 2, 0], dilations=[1, 2]), ort=True)
transposed("test_aicf_convtranspose_output_shape_same_lower", (1, 2, 4, 5), (2, 3, 4, 3),
           dict(strides=[2, 2], output_shape=[9, 11], auto_pad="SAME_LOWER"))
transposed("test_aicf_convtranspose_pads_past_reach", (1, 2, 6, 6), (2, 2, 3, 3),
           dict(strides=[2, 1], pads=[3, 0, 1, 2]))
x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
node_case("test_aicf_conv_uneven_pads", "Conv", x,
          [("w", rng.standard_normal((4, 3, 2, 4)).astype(np.float32))], dict(strides=[2, 2], pads=[0, 2, 1, 1]))
node_case("test_aicf_conv_same_upper_even_kernel", "Conv", x,
          [("w", rng.standard_normal((2, 3, 4, 2)).astype(np.float32))], dict(strides=[2, 3], auto_pad="SAME_UPPER"))
x1 = rng.standard_normal((2, 3, 11)).astype(np.float32)
node_case("test_aicf_maxpool1d_ceil", "MaxPool", x1, [], dict(kernel_shape=[3], strides=[2], pads=[1, 0], ceil_mode=1), opset=19)
node_case("test_aicf_averagepool1d_exclude_pad", "AveragePool", x1, [],
          dict(kernel_shape=[4], strides=[3], pads=[2, 1], count_include_pad=0), opset=19)
node_case("test_aicf_maxpool_dilated_uneven", "MaxPool", x, [],
          dict(kernel_shape=[2, 3], strides=[2, 1], dilations=[3, 2], pads=[1, 0, 0, 2]), opset=19)
node_case("test_aicf_averagepool_ceil_include_pad", "AveragePool", x, [],
          dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), opset=19)
node_case("test_aicf_averagepool_ceil_exclude_pad_uneven", "AveragePool", x, [],
          dict(kernel_shape=[3, 2], strides=[2, 3], pads=[0, 1, 2, 0], ceil_mode=1), opset=19)
node_case("test_aicf_averagepool_dilated", "AveragePool", x, [],
          dict(kernel_shape=[2, 2], strides=[1, 2], dilations=[2, 3], pads=[1, 1, 1, 1], count_include_pad=1), opset=19)
x3 = rng.standard_normal((2, 3, 5, 6, 7)).astype(np.float32)
node_case("test_aicf_conv3d_strided_padded", "Conv", x3,
          [("w", rng.standard_normal((4, 3, 3, 2, 3)).astype(np.float32)),
           ("b", rng.standard_normal((4,)).astype(np.float32))],
          dict(strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0]))
node_case("test_aicf_conv3d_grouped_dilated_same", "Conv", rng.standard_normal((1, 4, 6, 5, 5)).astype(np.float32),
          [("w", rng.standard_normal((6, 2, 2, 3, 3)).astype(np.float32))],
          dict(group=2, dilations=[2, 1, 1], auto_pad="SAME_UPPER"))
x3 = rng.standard_normal((2, 3, 7, 6, 5)).astype(np.float32)
node_case("test_aicf_maxpool3d_ceil_uneven", "MaxPool", x3, [],
          dict(kernel_shape=[3, 2, 2], strides=[2, 2, 1], pads=[1, 0, 0, 0, 1, 1], ceil_mode=1), opset=19)
node_case("test_aicf_averagepool3d_exclude_pad_ceil", "AveragePool", x3, [],
          dict(kernel_shape=[2, 3, 2], strides=[2, 2, 2], pads=[1, 1, 0, 0, 1, 1], ceil_mode=1), opset=19)
transposed("test_aicf_convtranspose3d_strided_output_padding", (2, 3, 3, 4, 3), (3, 2, 3, 2, 3),
           dict(strides=[2, 1, 2], pads=[1, 0, 0, 2, 1, 1], output_padding=[1, 0, 1]))
transposed("test_aicf_convtranspose3d_grouped_output_shape", (1, 4, 3, 3, 4), (4, 2, 2, 3, 2),
           dict(group=2, strides=[3, 2, 2], dilations=[2, 1, 1], output_shape=[8, 6, 8]), ort=True)
# 3-D convolutions whose depth taps read only padding for every output
# (the importer leaves them out): one frame under a window of 3; a strided
# window of 5 over 2 frames padded by 3 in front (3 dead taps); every tap
# in the padding (the output is the bias).
node_case("test_aicf_conv3d_one_frame", "Conv", rng.standard_normal((2, 3, 1, 5, 6)).astype(np.float32),
          [("w", rng.standard_normal((4, 3, 3, 3, 3)).astype(np.float32)),
           ("b", rng.standard_normal((4,)).astype(np.float32))],
          dict(pads=[1, 1, 1, 1, 1, 1]))
node_case("test_aicf_conv3d_taps_in_padding", "Conv", rng.standard_normal((1, 2, 2, 4, 4)).astype(np.float32),
          [("w", rng.standard_normal((3, 2, 5, 2, 2)).astype(np.float32))],
          dict(strides=[2, 1, 1], pads=[3, 0, 0, 1, 0, 0]))
node_case("test_aicf_conv3d_all_taps_in_padding", "Conv", rng.standard_normal((1, 2, 1, 3, 3)).astype(np.float32),
          [("w", rng.standard_normal((2, 2, 1, 2, 2)).astype(np.float32)),
           ("b", rng.standard_normal((2,)).astype(np.float32))],
          dict(strides=[3, 1, 1], pads=[2, 0, 0, 0, 0, 0]))
# Attention (opset 23) under constant masks that broadcast to the scores,
# grouped-query heads (4 over 2): a float mask of one value per key; a
# padding mask [B, 1, 1, keys]; a per-head float mask with is_causal.
q = rng.standard_normal((2, 4, 3, 4)).astype(np.float32)
k = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
v = rng.standard_normal((2, 2, 5, 4)).astype(np.float32)
node_case("test_aicf_attention_key_mask", "Attention", q,
          [("k", k), ("v", v), ("m", rng.standard_normal((5,)).astype(np.float32))], {}, opset=23)
padding = np.ones((2, 1, 1, 5), bool)
padding[0, 0, 0, 3:] = False
node_case("test_aicf_attention_padding_mask", "Attention", q, [("k", k), ("v", v), ("m", padding)], {}, opset=23)
heads = rng.standard_normal((1, 4, 1, 5)).astype(np.float32)
scores = q @ np.repeat(k, 2, axis=1).transpose(0, 1, 3, 2) / 2.0 + heads
scores = scores + np.where(np.arange(5)[None, :] <= np.arange(3)[:, None], 0.0, -np.inf)
p = np.exp(scores - scores.max(-1, keepdims=True))
node_case("test_aicf_attention_causal_head_mask", "Attention", q, [("k", k), ("v", v), ("m", heads)],
          dict(is_causal=1), opset=23,
          expected=((p / p.sum(-1, keepdims=True)) @ np.repeat(v, 2, axis=1)).astype(np.float32))
# GroupNormalization: opset 18's scale and bias per group (3 groups of 2
# channels), opset 21's per channel, over a 1-D input.
gx = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
gs, gb = rng.standard_normal((3,)).astype(np.float32), rng.standard_normal((3,)).astype(np.float32)
grouped = gx.reshape(2, 3, -1).astype(np.float64)
normal = (grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + 1e-3)
node_case("test_aicf_group_normalization_18_per_group", "GroupNormalization", gx, [("s", gs), ("b", gb)],
          dict(num_groups=3, epsilon=1e-3), opset=18, check=False,
          expected=(normal * gs[None, :, None] + gb[None, :, None]).reshape(gx.shape).astype(np.float32))
node_case("test_aicf_group_normalization_21_1d", "GroupNormalization",
          rng.standard_normal((2, 6, 5)).astype(np.float32),
          [("s", rng.standard_normal((6,)).astype(np.float32)), ("b", rng.standard_normal((6,)).astype(np.float32))],
          dict(num_groups=2), opset=21)
