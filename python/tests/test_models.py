"""The reference models run from Python match PyTorch's outputs."""
import os

import numpy as np
import pytest

import nimble
from conftest import assert_matches, program

# Small enough to compile in seconds; between them: dynamic batch (mlp),
# data-dependent output shapes with empty results and int64 (dyn_ops), a
# 0-d int64 input and control flow (loop_if), three outputs over a dynamic
# sequence (lstm), int64 ids (bert_tiny_emb).
MODELS = ["mlp", "dyn_ops", "loop_if", "lstm", "bert_tiny_emb"]


@pytest.mark.parametrize("name", MODELS)
def test_reference_model_matches_pytorch(name, reference, compile_model):
    ref = reference(name)
    exe = nimble.load(compile_model(ref.onnx))
    for case in ref.cases:
        out = exe.run(**ref.inputs(case))
        want = ref.outputs(case)
        assert list(out) == list(want), "outputs %s, expected %s" % (list(out), list(want))
        for k in want:
            assert_matches(out[k], want[k], ref.rtol, ref.atol,
                           "%s case %d (%s) output %s" % (name, case["id"], case["note"], k))


@pytest.mark.parametrize("name", MODELS)
def test_inputs_describe_the_model_signature(name, reference, compile_model):
    ref = reference(name)
    exe = nimble.load(compile_model(ref.onnx))
    assert [i.name for i in exe.inputs] == [i["name"] for i in ref.meta["inputs"]]
    for got, want in zip(exe.inputs, ref.meta["inputs"]):
        assert got.dtype == np.dtype(want["dtype"])
        # ONNX's dim_param names are kept; numbers are numbers.
        assert list(got.shape) == want["shape"], (got, want)
    assert [o.name for o in exe.outputs] == [o["name"] for o in ref.meta["outputs"]]
    for got, want in zip(exe.outputs, ref.meta["outputs"]):
        assert got.dtype == np.dtype(want["dtype"])
        assert len(got.shape) == len(want["shape"])
        # A dim the exporter left symbolic may be one Nimble's type inference
        # knows (loop_if's y is [batch, 16]); a known one stays known.
        for g, w in zip(got.shape, want["shape"]):
            assert g == w if isinstance(w, int) else (g is None or isinstance(g, (str, int))), \
                (got, want)


def test_any_and_symbolic_dims_read_as_none_and_names(compile_model):
    exe = nimble.load(compile_model(program("identity.nir")))
    assert exe.inputs == (nimble.TensorInfo("x", np.dtype(np.float32), (None, 3)),)
    exe = nimble.load(compile_model(program("masked.nir")))
    assert exe.inputs == (nimble.TensorInfo("x", np.dtype(np.float32), ("n",)),
                          nimble.TensorInfo("mask", np.dtype(np.bool_), ("n",)))
    assert [o.dtype for o in exe.outputs] == [np.dtype(np.float32), np.dtype(np.bool_)]


def test_inputs_by_position_mapping_or_keyword_give_one_answer(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    case = ref.cases[1]
    x = ref.inputs(case)["x"]
    want = ref.outputs(case)["y"]
    for out in (exe.run(x), exe.run({"x": x}), exe.run(x=x), exe(x=x), exe.entry("main").run(x)):
        assert_matches(out["y"], want, ref.rtol, ref.atol, "y")
        assert out[0] is out["y"]  # outputs by index too


def test_a_directory_of_parts_and_bytes_load_like_the_file(mlp, compile_model):
    ref, path = mlp
    parts = compile_model(ref.onnx, parts=True)
    assert os.path.isdir(parts)
    with open(path, "rb") as f:
        data = f.read()
    case = ref.cases[0]
    for exe in (nimble.load(parts), nimble.load(data)):
        assert exe.target == nimble.load(path).target
        assert_matches(exe.run(**ref.inputs(case))["y"], ref.outputs(case)["y"], ref.rtol, ref.atol,
                       "y from %s" % exe.source)


def test_bool_inputs_and_outputs_are_numpy_bool(compile_model):
    exe = nimble.load(compile_model(program("masked.nir")))
    x = np.array([1.5, -2.0, 3.0, -4.25, 0.0], np.float32)
    mask = np.array([True, False, False, True, True])
    out = exe.run(x=x, mask=mask)
    np.testing.assert_array_equal(out[0], np.where(mask, x, -x))
    assert out[1].dtype == np.bool_
    np.testing.assert_array_equal(out[1], x > 0)


def test_python_lists_take_the_declared_dtype(compile_model):
    exe = nimble.load(compile_model(program("masked.nir")))
    out = exe.run(x=[1, -2, 3], mask=[True, True, False])
    np.testing.assert_array_equal(out[0], np.array([1, -2, -3], np.float32))
    np.testing.assert_array_equal(out[1], [True, False, True])


def test_executable_metadata(mlp):
    _, path = mlp
    exe = nimble.load(path, num_threads=2)
    assert exe.entries == ("main",)
    assert exe.target in ("x86_64-linux-gnu", "aarch64-linux-gnu")
    assert exe.producer == "nimble " + nimble.runtime_version()
    assert exe.source_digest.startswith("sha256:")
    assert exe.format_version == 2
    assert nimble.runtime_library() and os.path.exists(nimble.runtime_library())
    assert nimble.blas_name()
    # The own kernels at least, and the BLAS named in the description.
    assert nimble.sgemm_name() and nimble.blas_name() in nimble.sgemm_name()


def tree(t):
    """A tree of word ids from treelstm.json (a leaf is an int, a node a
    pair) as a nimble.Adt of the Tree-LSTM's `type Tree[T] { Leaf(T), Node(...) }`."""
    if isinstance(t, list):
        return nimble.Adt("Node", tree(t[0]), tree(t[1]))
    return nimble.Adt("Leaf", t)


def test_the_tree_lstm_runs_on_adt_trees_and_matches_pytorch(reference, compile_model):
    ref = reference("treelstm")
    exe = nimble.load(compile_model(os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "examples", "treelstm.nir")))
    assert exe.inputs[0] == nimble.TensorInfo("tree", "adt", ())
    models = os.path.dirname(ref.meta_path)
    params = {k: np.load(os.path.join(models, v["file"])) for k, v in ref.meta["params"].items()}
    weights = [params[k] for k in ("emb.weight", "leaf.weight", "leaf.bias", "node.weight",
                                   "node.bias")]
    want_h = np.load(os.path.join(models, ref.meta["root_h"]["file"]))
    want_c = np.load(os.path.join(models, ref.meta["root_c"]["file"]))
    for i, t in enumerate(ref.meta["trees"]):
        h, c = exe.run(tree(t), *weights).values()
        assert_matches(h, want_h[i], ref.rtol, ref.atol, "root h of tree %d" % i)
        assert_matches(c, want_c[i], ref.rtol, ref.atol, "root c of tree %d" % i)
