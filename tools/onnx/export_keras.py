"""Writes Keras models exported by tf2onnx that the importer once refused,
and their references:

- test/onnx/keras_gru.onnx: a GRU (returning its sequence), a SimpleRNN
  reading it backwards (`go_backwards=True`) and a Dense head. tf2onnx
  writes each recurrent layer as TensorFlow's while loop (an ONNX `Loop`
  whose weights ride as carried values) and the backward read as a
  `ReverseSequence`: both were refused ("not supported").

The batch axis is symbolic, as Keras exports it. The reference holds the
input (4 rows), labels, onnxruntime's output, Keras's loss, and every
weight after one SGD step (lr 0.1) of the sparse categorical
cross-entropy of the logits, under the name the importer gives the
initializer holding it (`after.<name>`).

Needs TensorFlow, Keras 3 and tf2onnx (not in requirements.txt: a
separate venv, `pip install tensorflow tf2onnx onnxruntime safetensors`):

    python tools/onnx/export_keras.py test/onnx
"""
import os
import re
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402


def param_name(onnx_name):
    """The importer's name for an initializer (`param_name` in
    compiler/src/import/onnx.rs)."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", onnx_name).strip(".")
    return "p" + s if not s or s[0].isdigit() else s


def write(model, x, labels, name, out):
    path = os.path.join(out, f"{name}.onnx")
    spec = (tf.TensorSpec((None,) + x.shape[1:], tf.float32, name="input0"),)
    fn = tf.function(lambda v: model(v, training=False))
    tf2onnx.convert.from_function(fn, input_signature=spec, opset=13, output_path=path)
    m = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_out = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    # Each weight's initializer: the one holding its values (tf2onnx keeps
    # Keras's layout for these layers).
    names = {}
    for v in model.trainable_variables:
        hits = [k for k, a in inits.items() if a.shape == tuple(v.shape) and np.array_equal(a, np.asarray(v))]
        assert len(hits) == 1, (v.path, hits)
        names[v.path] = param_name(hits[0])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    keras.optimizers.SGD(learning_rate=0.1).apply_gradients(zip(grads, model.trainable_variables))
    arrays = {
        "input0": x,
        "labels": labels.astype(np.int32),
        "ort.output0": ort_out.astype(np.float32),
        "torch.loss": np.array(float(loss), dtype=np.float32),
    }
    arrays.update({f"after.{names[v.path]}": np.asarray(v).astype(np.float32) for v in model.trainable_variables})
    save_file(arrays, os.path.join(out, f"{name}.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes; weights {sorted(names.values())}")


def main():
    out = sys.argv[1]
    keras.utils.set_random_seed(0)
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((6, 5)),
            layers.GRU(8, return_sequences=True, bias_initializer="random_normal", name="gru"),
            layers.SimpleRNN(6, go_backwards=True, bias_initializer="random_normal", name="rnn"),
            layers.Dense(4, bias_initializer="random_normal", name="head"),
        ]
    )
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    labels = rng.integers(0, 4, 4)
    write(model, x, labels, "keras_gru", out)


if __name__ == "__main__":
    main()
