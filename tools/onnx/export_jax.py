"""Writes a JAX model exported by jax2onnx that the importer once refused,
and its reference:

- test/onnx/jax_scan.onnx: a GRU written with `jax.lax.scan` over 6 steps
  and a dense head. jax2onnx writes every scan as an ONNX `Loop` (a trip
  count it knows, a condition that stays true, the weights read from the
  graph around the body), refused before ("not supported").

The batch axis is symbolic (`("B", 30)`). The reference holds the input (4
rows), labels, onnxruntime's output, the loss (optax's integer-label
softmax cross-entropy, mean), and every weight after one `optax.sgd(0.1)`
step, under the importer's name for the initializer holding it
(`after.<name>`, in its layout).

Needs JAX, jax2onnx and optax (not in requirements.txt: a separate venv,
`pip install jax[cpu] optax jax2onnx onnxruntime safetensors`):

    python tools/onnx/export_jax.py test/onnx
"""
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import optax  # noqa: E402
from jax2onnx import to_onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

STEPS, FEATURES, HIDDEN, CLASSES = 6, 5, 7, 4


def param_name(onnx_name):
    """The importer's name for an initializer (`param_name` in
    compiler/src/import/onnx.rs)."""
    s = re.sub(r"[^A-Za-z0-9_.]", "_", onnx_name).strip(".")
    return "p" + s if not s or s[0].isdigit() else s


def gru(p, x):
    xs = jnp.swapaxes(x, 0, 1)
    h0 = jnp.zeros((x.shape[0], HIDDEN), x.dtype)

    def step(h, xt):
        gx, gh = xt @ p["wx"] + p["b"], h @ p["wh"]
        r = jax.nn.sigmoid(gx[:, :HIDDEN] + gh[:, :HIDDEN])
        z = jax.nn.sigmoid(gx[:, HIDDEN:2 * HIDDEN] + gh[:, HIDDEN:2 * HIDDEN])
        n = jnp.tanh(gx[:, 2 * HIDDEN:] + r * gh[:, 2 * HIDDEN:])
        h = (1 - z) * n + z * h
        return h, h

    h, _ = jax.lax.scan(step, h0, xs)
    return h @ p["wo"] + p["bo"]


def main():
    out = sys.argv[1]
    k = jax.random.split(jax.random.PRNGKey(0), 6)
    p = {
        "wx": 0.4 * jax.random.normal(k[0], (FEATURES, 3 * HIDDEN)),
        "wh": 0.4 * jax.random.normal(k[1], (HIDDEN, 3 * HIDDEN)),
        "b": 0.1 * jax.random.normal(k[2], (3 * HIDDEN,)),
        "wo": 0.4 * jax.random.normal(k[3], (HIDDEN, CLASSES)),
        "bo": 0.1 * jax.random.normal(k[4], (CLASSES,)),
    }
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, STEPS, FEATURES)).astype(np.float32)
    labels = rng.integers(0, CLASSES, 4).astype(np.int32)
    path = os.path.join(out, "jax_scan.onnx")
    model = to_onnx(lambda v: gru(p, v), [("B", STEPS, FEATURES)], model_name="jax_scan")
    onnx.save(model, path)
    assert any(n.op_type == "Loop" for n in model.graph.node)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_out = sess.run(None, {sess.get_inputs()[0].name: x})[0]

    def loss_fn(q):
        return optax.softmax_cross_entropy_with_integer_labels(gru(q, jnp.asarray(x)), jnp.asarray(labels)).mean()

    loss, grads = jax.value_and_grad(loss_fn)(p)
    tx = optax.sgd(0.1)
    updates, _ = tx.update(grads, tx.init(p), p)
    after = optax.apply_updates(p, updates)
    arrays = {
        "input0": x,
        "labels": labels,
        "ort.output0": np.asarray(ort_out, dtype=np.float32),
        "torch.loss": np.array(float(loss), dtype=np.float32),
    }
    for key, value in p.items():
        # (A bias may be written as one row, [1, n].)
        hits = [n for n, a in inits.items() if a.size == value.size and np.array_equal(a.ravel(), np.ravel(value))]
        assert len(hits) == 1, (key, hits)
        shape = inits[hits[0]].shape
        arrays[f"after.{param_name(hits[0])}"] = np.asarray(after[key], dtype=np.float32).reshape(shape)
    save_file(arrays, os.path.join(out, "jax_scan.io.safetensors"))
    print(f"{path}: {os.path.getsize(path)} bytes; weights {sorted(k for k in arrays if k.startswith('after.'))}")


if __name__ == "__main__":
    main()
