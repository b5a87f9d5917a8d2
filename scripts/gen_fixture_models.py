#!/usr/bin/python3
"""Writes Nimble's own small ONNX fixture models, built with onnx.helper and
numpy only (no torch), with reference outputs computed in numpy.

    /usr/bin/python3 scripts/gen_fixture_models.py OUTDIR

Good models (opset 13):
  mlp          Gemm/Relu/Gemm, dynamic batch ("batch")
  cnn          Conv/Relu/MaxPool/Flatten/Gemm, dynamic batch
  control_flow Loop (trip count from an input) then If; both bodies use
               outer-scope values
  dim_param    symbolic dims ("batch", "seq"), Softmax and a Constant
  unsorted     the mlp with its nodes stored in reverse order (the loader
               sorts them)
For each: OUTDIR/<name>.onnx, every initializer as
OUTDIR/<name>.init/<initializer>.npy, and reference cases as
OUTDIR/<name>.ref/<case>/<tensor>.npy (inputs and outputs, several shapes).

Bad models, each with the error the loader must give (fixtures.json lists
the expected message fragment): dangling input, cycle, an operator ONNX does
not define, wrong attribute type, initializer of inconsistent size,
duplicate output name, external data.

OUTDIR/fixtures.json describes everything. Fixed seeds: reruns give the
same bytes. Run with /usr/bin/python3 (Debian's python3-onnx, python3-numpy).
"""
import json
import os
import shutil
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 13)]
PRODUCER = "nimble-gen-fixture-models"


def make_model(graph, opset=None):
    model = helper.make_model(graph, opset_imports=opset or OPSET, producer_name=PRODUCER)
    model.ir_version = 7
    return model


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def relu(x):
    return np.maximum(x, 0)


def gemm_t(x, w, b):
    """Gemm with transB=1: x @ w.T + b."""
    return (x @ w.T + b).astype(np.float32)


# ---- good models ----

def mlp(rng):
    w1, b1 = f32(rng, 16, 8), f32(rng, 16)
    w2, b2 = f32(rng, 4, 16), f32(rng, 4)
    inits = [
        numpy_helper.from_array(w1, "w1"),
        # b1 through the typed float_data field rather than raw_data, so
        # both carriers are exercised.
        helper.make_tensor("b1", TensorProto.FLOAT, [16], b1.tolist(), raw=False),
        numpy_helper.from_array(w2, "w2"),
        numpy_helper.from_array(b2, "b2"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="gemm_0", transB=1),
        helper.make_node("Relu", ["h"], ["h_relu"], name="relu_0"),
        helper.make_node("Gemm", ["h_relu", "w2", "b2"], ["y"], name="gemm_1", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        inits)
    cases = []
    for batch in (1, 3, 7):
        x = f32(rng, batch, 8)
        y = gemm_t(relu(gemm_t(x, w1, b1)), w2, b2)
        cases.append(("batch%d" % batch, {"x": x}, {"y": y}))
    return make_model(graph), {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, cases


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    k, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, k, oh, ow), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow].astype(np.float64)
            out += np.einsum("nchw,kc->nkhw", patch, w[:, :, i, j].astype(np.float64))
    return (out + b.reshape(1, k, 1, 1)).astype(np.float32)


def maxpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def cnn(rng):
    wc, bc = f32(rng, 4, 1, 3, 3), f32(rng, 4)
    wf, bf = f32(rng, 3, 64), f32(rng, 3)
    inits = [numpy_helper.from_array(a, n) for a, n in ((wc, "conv_w"), (bc, "conv_b"),
                                                        (wf, "fc_w"), (bf, "fc_b"))]
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], name="conv_0",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu_0"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool_0", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten_0", axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], name="fc_0", transB=1),
    ]
    graph = helper.make_graph(
        nodes, "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        inits)
    cases = []
    for batch in (1, 2, 5):
        x = f32(rng, batch, 1, 8, 8)
        p = maxpool2(relu(conv2d(x, wc, bc, 1)))
        y = gemm_t(p.reshape(batch, -1), wf, bf)
        cases.append(("batch%d" % batch, {"x": x}, {"y": y}))
    return make_model(graph), {"conv_w": wc, "conv_b": bc, "fc_w": wf, "fc_b": bf}, cases


def control_flow(rng):
    """acc = sum of x over n iterations (Loop), then acc * 2 if cond else acc - 1 (If)."""
    # Loop body: (iter, cond_in, acc_in) -> (cond_out, acc_out); x comes
    # from the outer scope.
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
         helper.make_node("Add", ["acc_in", "x"], ["acc_out"], name="body_add")],
        "loop_body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3])])
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["acc", "two"], ["then_out"], name="then_mul")],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["acc", "one"], ["else_out"], name="else_sub")],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [3])])
    nodes = [
        helper.make_node("Constant", [], ["two"], name="const_two", value_float=2.0),
        helper.make_node("Constant", [], ["one"], name="const_one",
                         value=numpy_helper.from_array(np.array(1.0, dtype=np.float32))),
        helper.make_node("Constant", [], ["true"], name="const_true",
                         value=numpy_helper.from_array(np.array(True))),
        helper.make_node("Loop", ["n", "true", "zeros"], ["acc"], name="loop_0", body=body),
        helper.make_node("If", ["cond"], ["y"], name="if_0", then_branch=then_g,
                         else_branch=else_g),
    ]
    zeros = np.zeros(3, dtype=np.float32)
    graph = helper.make_graph(
        nodes, "control_flow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("n", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(zeros, "zeros")])
    cases = []
    for n, cond in ((0, True), (3, False), (5, True)):
        x = f32(rng, 3)
        acc = np.zeros(3, dtype=np.float32)
        for _ in range(n):
            acc = (acc + x).astype(np.float32)
        y = acc * np.float32(2) if cond else acc - np.float32(1)
        cases.append(("n%d_%s" % (n, "then" if cond else "else"),
                      {"x": x, "n": np.array(n, dtype=np.int64), "cond": np.array(cond)},
                      {"y": y.astype(np.float32)}))
    return make_model(graph), {"zeros": zeros}, cases


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def dim_param(rng):
    scale = f32(rng, 4)
    offset = np.array([-2, -1, 0, 1, 2, 3], dtype=np.int8)  # int8 travels in int32_data
    nodes = [
        helper.make_node("Constant", [], ["scale"], name="const_scale",
                         value=numpy_helper.from_array(scale, "scale_value")),
        helper.make_node("Softmax", ["x"], ["s"], name="softmax_0", axis=-1),
        helper.make_node("Mul", ["s", "scale"], ["y"], name="mul_0"),
    ]
    graph = helper.make_graph(
        nodes, "dim_param",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 4])],
        [helper.make_tensor("offset", TensorProto.INT8, [6], offset.tolist(), raw=False)],
        value_info=[helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch", "seq", None])])
    cases = []
    for batch, seq in ((1, 1), (2, 5), (3, 17)):
        x = f32(rng, batch, seq, 4)
        cases.append(("b%d_s%d" % (batch, seq), {"x": x},
                      {"y": (softmax(x.astype(np.float64)) * scale).astype(np.float32)}))
    return make_model(graph), {"offset": offset}, cases


def unsorted(rng):
    model, inits, cases = mlp(rng)
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    model.graph.name = "unsorted"
    return model, inits, cases


# ---- bad models: (name, model, expected error fragment) ----

def tiny_graph(nodes, inputs=("x",), outputs=("y",), inits=(), name="bad"):
    return helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in outputs],
        list(inits))


def bad_models():
    out = []
    out.append(("bad_dangling_input", make_model(tiny_graph([
        helper.make_node("Relu", ["x"], ["a"], name="relu_0"),
        helper.make_node("Add", ["a", "nowhere"], ["y"], name="add_1")])),
        "node 'add_1' (Add): input 1 'nowhere' is not defined"))
    out.append(("bad_cycle", make_model(tiny_graph([
        helper.make_node("Add", ["x", "b"], ["a"], name="add_a"),
        helper.make_node("Mul", ["a", "x"], ["b"], name="mul_b"),
        helper.make_node("Relu", ["a"], ["y"], name="relu_y")])),
        "is on a cycle"))
    out.append(("bad_unsupported_op", make_model(tiny_graph([
        helper.make_node("NimbleMystery", ["x"], ["y"], name="mystery_0")])),
        "node 'mystery_0' (NimbleMystery): operator 'NimbleMystery' is not defined in domain "
        "'ai.onnx' (opset 13)"))
    w = numpy_helper.from_array(np.ones((3, 3, 1, 1), dtype=np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_0", kernel_shape=[1, 1])
    conv.attribute.append(helper.make_attribute("strides", 1.0))
    out.append(("bad_attr_type", make_model(tiny_graph([conv], inits=[w])),
                "node 'conv_0' (Conv): attribute 'strides' must be INTS, got FLOAT"))
    bad_w = TensorProto()
    bad_w.name = "w"
    bad_w.data_type = TensorProto.FLOAT
    bad_w.dims.extend([2, 3])
    bad_w.raw_data = b"\0" * 20
    out.append(("bad_init_size", make_model(tiny_graph([
        helper.make_node("Add", ["x", "w"], ["y"], name="add_0")], inits=[bad_w])),
        "tensor 'w': raw_data has 20 bytes, but 6 elements of FLOAT need 24"))
    out.append(("bad_duplicate_output", make_model(tiny_graph([
        helper.make_node("Relu", ["x"], ["y"], name="relu_0"),
        helper.make_node("Neg", ["x"], ["y"], name="neg_1")])),
        "node 'neg_1' (Neg): output 'y' is already defined by node 'relu_0' (Relu)"))
    ext = TensorProto()
    ext.name = "w"
    ext.data_type = TensorProto.FLOAT
    ext.dims.extend([2, 3])
    ext.data_location = TensorProto.EXTERNAL
    entry = ext.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    out.append(("bad_external_data", make_model(tiny_graph([
        helper.make_node("Add", ["x", "w"], ["y"], name="add_0")], inits=[ext])),
        "tensor 'w': data stored in an external file ('weights.bin') is not supported"))
    return out


def tensor_desc(vi):
    t = vi.type.tensor_type
    dims = []
    for d in t.shape.dim:
        dims.append(d.dim_value if d.HasField("dim_value") else
                    (d.dim_param if d.HasField("dim_param") else None))
    return {"name": vi.name, "elem_type": t.elem_type, "dims": dims}


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: /usr/bin/python3 %s OUTDIR\n" % argv[0])
        return 2
    outdir = argv[1]
    os.makedirs(outdir, exist_ok=True)
    manifest = {"good": [], "bad": []}
    builders = (("mlp", mlp, 1), ("cnn", cnn, 2), ("control_flow", control_flow, 3),
                ("dim_param", dim_param, 4), ("unsorted", unsorted, 1))
    for name, build, seed in builders:
        rng = np.random.default_rng(seed)
        model, inits, cases = build(rng)
        with open(os.path.join(outdir, name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())
        for sub in (".init", ".ref"):
            path = os.path.join(outdir, name + sub)
            if os.path.exists(path):
                shutil.rmtree(path)
            os.makedirs(path)
        for init_name, value in inits.items():
            np.save(os.path.join(outdir, name + ".init", init_name + ".npy"), value)
        case_names = []
        for case_name, inputs, outputs in cases:
            case_dir = os.path.join(outdir, name + ".ref", case_name)
            os.makedirs(case_dir)
            for tensor_name, value in list(inputs.items()) + list(outputs.items()):
                np.save(os.path.join(case_dir, tensor_name + ".npy"), value)
            case_names.append(case_name)
        manifest["good"].append({
            "name": name,
            "nodes": [n.name for n in model.graph.node],
            "inputs": [tensor_desc(vi) for vi in model.graph.input],
            "outputs": [tensor_desc(vi) for vi in model.graph.output],
            "initializers": sorted(inits),
            "cases": case_names,
        })
    for name, model, expected in bad_models():
        with open(os.path.join(outdir, name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())
        manifest["bad"].append({"name": name, "error": expected})
    with open(os.path.join(outdir, "fixtures.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote %d good and %d bad models under %s"
          % (len(manifest["good"]), len(manifest["bad"]), outdir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
