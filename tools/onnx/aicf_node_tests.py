"""Node tests of cases ONNX's own generators do not cover, in their layout
(model.onnx + test_data_set_0/{input,output}_0.pb), the expected outputs
from onnx's reference evaluator: 1-D convolutions (strided and padded;
grouped, dilated and SAME-padded).

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
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, **attrs)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    y = ReferenceEvaluator(model).run(None, {"x": x})[0]
    graph.output[0].CopyFrom(helper.make_tensor_value_info("y", TensorProto.FLOAT, y.shape))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
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
