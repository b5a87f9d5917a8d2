"""Errors are Python exceptions carrying the runtime's own message."""
import numpy as np
import pytest

import nimble
from conftest import program


def test_a_wrong_shape_names_the_input_and_both_shapes(mlp):
    exe = nimble.load(mlp[1])
    with pytest.raises(nimble.InvalidArgumentError) as e:
        exe.run(x=np.zeros((2, 100), np.float32))
    assert e.value.code == "INVALID_ARGUMENT" and e.value.code_value == 1
    assert e.value.message == "entry 'main': input 'x' has shape [2,100], expected [?batch,784]"
    assert isinstance(e.value, ValueError)  # catchable as the builtin kind too
    with pytest.raises(nimble.InvalidArgumentError, match=r"input 'x' has shape \[784\]"):
        exe.run(x=np.zeros(784, np.float32))


def test_a_wrong_dtype_names_both_dtypes(mlp):
    exe = nimble.load(mlp[1])
    with pytest.raises(nimble.InvalidArgumentError,
                       match="input 'x' has dtype float64, expected float32"):
        exe.run(x=np.zeros((1, 784)))  # float64: no silent cast


def test_symbolic_dims_must_agree_across_inputs(compile_model):
    exe = nimble.load(compile_model(program("masked.nir")))
    with pytest.raises(nimble.InvalidArgumentError) as e:
        exe.run(x=np.zeros(3, np.float32), mask=np.zeros(4, bool))
    assert "input 'mask' has shape [4], expected [?n] with ?n = 3 (from input 'x')" in str(e.value)


def test_missing_unknown_and_doubled_inputs_are_refused_before_the_runtime(mlp):
    exe = nimble.load(mlp[1])
    x = np.zeros((1, 784), np.float32)
    with pytest.raises(nimble.InvalidArgumentError, match="missing input 'x'"):
        exe.run()
    with pytest.raises(nimble.InvalidArgumentError, match="has no input 'y' \\(its inputs: x\\)"):
        exe.run(x=x, y=x)
    with pytest.raises(nimble.InvalidArgumentError, match="input 'x' given twice"):
        exe.run(x, x=x)
    with pytest.raises(nimble.InvalidArgumentError, match="takes 1 inputs \\(x\\), 2 given"):
        exe.run(x, x)


def test_a_missing_file_is_not_found_and_a_bad_one_names_the_fault(tmp_path):
    with pytest.raises(nimble.NotFoundError) as e:
        nimble.load(tmp_path / "nope.nimble")
    assert str(tmp_path / "nope.nimble") in e.value.message
    bad = tmp_path / "bad.nimble"
    bad.write_bytes(b"not an executable at all")
    with pytest.raises(nimble.InvalidArgumentError,
                       match="at offset 0: bad magic: not a nimble executable"):
        nimble.load(bad)
    with pytest.raises(nimble.InvalidArgumentError, match="no part files"):
        nimble.load(tmp_path)  # a directory without parts
    with pytest.raises(nimble.InvalidArgumentError, match="bad magic"):
        nimble.load(b"\0" * 64)


def test_a_truncated_executable_is_refused(mlp, tmp_path):
    data = open(mlp[1], "rb").read()
    cut = tmp_path / "cut.nimble"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(nimble.Error) as e:
        nimble.load(cut)
    assert isinstance(e.value, (nimble.InvalidArgumentError, nimble.DataLossError,
                                nimble.OutOfRangeError)), e.value
    assert str(cut) in e.value.message


def test_an_unknown_entry_is_not_found(mlp):
    exe = nimble.load(mlp[1])
    with pytest.raises(nimble.NotFoundError, match="has no entry 'nope' \\(its entries: main\\)"):
        exe.entry("nope")
    with pytest.raises(LookupError):  # catchable as the builtin kind too
        exe.entry("nope")


def test_unsupported_input_objects_say_what_they_are(mlp):
    exe = nimble.load(mlp[1])
    with pytest.raises(nimble.InvalidArgumentError, match="dtype object has no DLPack"):
        exe.run(x=np.array([[object()] * 784], dtype=object))


def test_bad_store_references_and_unreachable_stores(tmp_path, monkeypatch):
    monkeypatch.delenv("NIMBLE_STORE", raising=False)
    with pytest.raises(nimble.InvalidArgumentError, match="missing '/NAME:TAG'"):
        nimble.fetch("http://127.0.0.1:5000", cache_dir=tmp_path)
    with pytest.raises(nimble.InvalidArgumentError, match="NIMBLE_STORE is not set"):
        nimble.fetch("team/model:x86", cache_dir=tmp_path)
    # Port 1 on loopback: nothing listens there.
    with pytest.raises(nimble.UnavailableError) as e:
        nimble.fetch("http://127.0.0.1:1/team/model:x86", cache_dir=tmp_path, max_attempts=1)
    assert "has no record of this tag" in e.value.message


def test_python_numbers_that_do_not_fit_the_declared_dtype_are_refused(reference, compile_model):
    exe = nimble.load(compile_model(reference("loop_if").onnx))
    x = np.zeros((1, 16), np.float32)
    with pytest.raises(nimble.InvalidArgumentError,
                       match="input 'n': 1.5 does not fit the declared dtype int64"):
        exe.run(x=x, n=1.5)
    assert exe.run(x=x, n=3)["y"].shape == (1, 16)  # an int that fits is taken


def test_adt_values_are_checked_against_the_declared_type(compile_model, reference):
    import os
    from test_models import tree
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = nimble.load(compile_model(os.path.join(root, "examples", "treelstm.nir")))
    w = [np.zeros(s, np.float32) for s in ((1000, 128), (384, 128), (384,), (640, 256), (640,))]
    with pytest.raises(nimble.InvalidArgumentError,
                       match=r"input 'tree' \(the root\): constructor Node has 2 fields, the value 1"):
        exe.run(nimble.Adt("Node", nimble.Adt("Leaf", 1)), *w)
    with pytest.raises(nimble.InvalidArgumentError,
                       match=r"input 'tree' at \.0\.0: field 0 of Leaf is a int64 tensor of shape \[2\]"):
        exe.run(nimble.Adt("Node", nimble.Adt("Leaf", np.array([1, 2])), tree(3)), *w)
    with pytest.raises(nimble.NotFoundError, match="input 'tree' has no constructor 'Twig'"):
        exe.run(nimble.Adt("Twig", 1), *w)
    with pytest.raises(nimble.InvalidArgumentError,
                       match="field 0 of Node is a Tree value: give a nimble.Adt, not int"):
        exe.run(nimble.Adt("Node", 3, 4), *w)
    with pytest.raises(nimble.InvalidArgumentError,
                       match="input 'tree' is an ADT value \\(a tree\\): give a nimble.Adt"):
        exe.run([1, 2], *w)
    with pytest.raises(nimble.InvalidArgumentError, match="1.5 does not fit the declared dtype int64"):
        exe.run(tree(1.5), *w)
    # After all that, a good tree still runs on the same VM.
    h, c = exe.run(tree([1, [2, 3]]), *w).values()
    assert h.shape == c.shape == (128,)
