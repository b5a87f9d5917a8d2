"""PyTorch tensors in and out, when torch is installed (Debian's
python3-torch); skipped otherwise."""
import gc

import numpy as np
import pytest

import nimble
from conftest import assert_matches, program

torch = pytest.importorskip("torch")


def test_torch_inputs_give_pytorchs_reference_outputs(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    for case in ref.cases:
        x = torch.from_numpy(ref.inputs(case)["x"])
        assert_matches(exe.run(x=x)["y"], ref.outputs(case)["y"], ref.rtol, ref.atol,
                       "y from a torch input, case %d" % case["id"])


def test_torch_inputs_are_passed_without_a_copy(compile_model):
    exe = nimble.load(compile_model(program("identity.nir")))
    x = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    t = exe.run_tensors(x=x)[0]
    assert t.data_ptr == x.data_ptr()
    # A tensor that requires grad is read through detach(), still in place.
    w = torch.ones(2, 3, requires_grad=True)
    assert exe.run_tensors(x=w)[0].data_ptr == w.data_ptr()
    # A transposed view is not row-major: it is copied, and the values kept.
    v = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    out = exe.run_tensors(x=v)[0]
    assert out.data_ptr != v.data_ptr()
    np.testing.assert_array_equal(out.numpy(), v.numpy())


def test_torch_bool_inputs(compile_model):
    exe = nimble.load(compile_model(program("masked.nir")))
    x = torch.tensor([1.0, -2.0, 3.0])
    mask = torch.tensor([False, True, True])
    out = exe.run(x=x, mask=mask)
    np.testing.assert_array_equal(out[0], torch.where(mask, x, -x).numpy())
    np.testing.assert_array_equal(out[1], (x > 0).numpy())


def test_torch_from_dlpack_shares_the_output_and_keeps_it_alive(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    case = ref.cases[1]
    t = exe.run_tensors(x=torch.from_numpy(ref.inputs(case)["x"]))["y"]
    pointer = t.data_ptr
    taken, freed = nimble.output_counts()
    y = torch.from_dlpack(t)
    assert y.data_ptr() == pointer and y.dtype == torch.float32 and tuple(y.shape) == t.shape
    del t
    gc.collect()
    assert nimble.output_counts() == (taken, freed)
    want = torch.from_numpy(ref.outputs(case)["y"])
    assert torch.allclose(y, want, rtol=ref.rtol, atol=ref.atol)
    del y
    gc.collect()
    assert nimble.output_counts() == (taken, freed + 1)


def test_other_devices_are_refused_clearly(mlp):
    exe = nimble.load(mlp[1])

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("not called for a device the runtime cannot read")

    with pytest.raises(nimble.UnimplementedError, match="input 'x' is on DLPack device"):
        exe.run(x=OnGpu())
