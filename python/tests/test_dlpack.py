"""Outputs are the runtime's own buffers (DLPack managed tensors), shared
with NumPy and DLPack consumers without copies, and freed exactly once."""
import ctypes
import gc
import weakref

import numpy as np
import pytest

import nimble
from nimble import _capi
from conftest import assert_matches, program


def runtime_data_pointer(tensor):
    """The data pointer in the runtime's DLManagedTensor itself, read by ctypes."""
    dl = tensor._managed.contents.dl_tensor
    return dl.data + dl.byte_offset


def test_numpy_outputs_share_the_runtime_output_buffer(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    case = ref.cases[2]
    t = exe.run_tensors(**ref.inputs(case))["y"]
    a = t.numpy()
    assert a.ctypes.data == runtime_data_pointer(t)
    assert np.shares_memory(a, np.asarray(t))
    assert not a.flags.writeable and not a.flags.owndata
    assert_matches(a, ref.outputs(case)["y"], ref.rtol, ref.atol, "y")
    # run() gives the same kind of view.
    y = exe.run(**ref.inputs(case))["y"]
    assert not y.flags.owndata and isinstance(y.base.owner, nimble.Tensor)
    assert y.ctypes.data == runtime_data_pointer(y.base.owner)


def test_an_output_is_freed_once_when_its_last_reference_goes(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    x = ref.inputs(ref.cases[2])["x"]
    gc.collect()
    base_in_use = exe.memory_stats()["bytes_in_use"]
    taken0, freed0 = nimble.output_counts()

    t = exe.run_tensors(x=x)["y"]
    held = exe.memory_stats()["bytes_in_use"]
    assert held > base_in_use  # the output's buffer is in use while held
    assert nimble.output_counts() == (taken0 + 1, freed0)
    view = t.numpy()
    del t
    gc.collect()
    assert nimble.output_counts() == (taken0 + 1, freed0)  # the view keeps it
    assert exe.memory_stats()["bytes_in_use"] == held
    view_copy = view.copy()
    del view
    gc.collect()
    assert nimble.output_counts() == (taken0 + 1, freed0 + 1)
    assert exe.memory_stats()["bytes_in_use"] == base_in_use
    gc.collect()
    assert nimble.output_counts() == (taken0 + 1, freed0 + 1)  # and never again
    assert_matches(view_copy, ref.outputs(ref.cases[2])["y"], ref.rtol, ref.atol, "y")


def test_outputs_outlive_the_executable_and_its_vm(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    y = exe.run(**ref.inputs(ref.cases[0]))["y"]
    del exe
    gc.collect()
    assert_matches(y, ref.outputs(ref.cases[0])["y"], ref.rtol, ref.atol, "y after the executable")


def test_dlpack_export_is_zero_copy_and_keeps_the_output_alive(mlp):
    ref, path = mlp
    exe = nimble.load(path)
    x = ref.inputs(ref.cases[1])["x"]
    t = exe.run_tensors(x=x)["y"]
    assert t.__dlpack_device__() == (_capi.kDLCPU, 0)
    pointer = runtime_data_pointer(t)
    taken, freed = nimble.output_counts()
    n = np.from_dlpack(t)
    assert n.ctypes.data == pointer and nimble.live_exports() == 1
    del t
    gc.collect()
    assert nimble.output_counts() == (taken, freed)
    assert_matches(n, ref.outputs(ref.cases[1])["y"], ref.rtol, ref.atol, "y by DLPack")
    del n
    gc.collect()
    assert nimble.output_counts() == (taken, freed + 1) and nimble.live_exports() == 0


def test_an_unconsumed_capsule_releases_its_export(mlp):
    exe = nimble.load(mlp[1])
    t = exe.run_tensors(x=np.zeros((1, 784), np.float32))["y"]
    taken, freed = nimble.output_counts()
    capsule = t.__dlpack__()
    del t
    gc.collect()
    assert nimble.live_exports() == 1 and nimble.output_counts() == (taken, freed)
    del capsule
    gc.collect()
    assert nimble.live_exports() == 0 and nimble.output_counts() == (taken, freed + 1)


def test_bool_outputs_export_as_dlpack_bool(compile_model):
    exe = nimble.load(compile_model(program("masked.nir")))
    x = np.array([1.0, -1.0, 2.0], np.float32)
    t = exe.run_tensors(x=x, mask=np.ones(3, bool))[1]
    assert t.dl_dtype == "bool" and t.dtype == np.bool_
    capsule = t.__dlpack__()
    address = _capi.pythonapi.PyCapsule_GetPointer(capsule, b"dltensor")
    dl = ctypes.cast(address, ctypes.POINTER(_capi.DLManagedTensor)).contents.dl_tensor
    assert (dl.dtype.code, dl.dtype.bits, dl.dtype.lanes) == (_capi.kDLBool, 8, 1)
    assert dl.data == runtime_data_pointer(t)
    # Our own importer reads it back as NumPy bool, still without a copy.
    from nimble._tensor import from_dlpack
    back = from_dlpack(t)
    assert back.dtype == np.bool_ and back.ctypes.data == runtime_data_pointer(t)
    np.testing.assert_array_equal(back, x > 0)


def test_contiguous_inputs_are_passed_without_a_copy(compile_model):
    # identity.nir returns its input: the output's buffer is the input's.
    exe = nimble.load(compile_model(program("identity.nir")))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    t = exe.run_tensors(x=x)[0]
    assert runtime_data_pointer(t) == x.ctypes.data
    # The output keeps the input alive: dropping ours does not free it.
    del x
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), np.arange(12, dtype=np.float32).reshape(4, 3))


def test_non_contiguous_inputs_are_copied_contiguous(compile_model):
    exe = nimble.load(compile_model(program("identity.nir")))
    big = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = big[:, ::2]  # strided view
    t = exe.run_tensors(x=x)[0]
    assert runtime_data_pointer(t) != x.ctypes.data
    np.testing.assert_array_equal(t.numpy(), x)
    xt = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3))
    np.testing.assert_array_equal(exe.run(x=xt)[0], xt)
    be = np.arange(6, dtype=">f4").reshape(2, 3)  # big-endian: converted
    np.testing.assert_array_equal(exe.run(x=be)[0], be.astype(np.float32))


class Producer:
    """A DLPack producer that is not a NumPy array: it hands out the capsule
    NumPy makes, whose deleter releases the array."""

    def __init__(self, array):
        self.array = array

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()


def test_objects_with_dlpack_are_taken_without_a_copy(compile_model):
    exe = nimble.load(compile_model(program("identity.nir")))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pointer = x.ctypes.data
    alive = weakref.ref(x)
    t = exe.run_tensors(x=Producer(x))[0]
    del x
    gc.collect()
    assert runtime_data_pointer(t) == pointer
    np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
    # The producer's managed tensor lives as long as the output that aliases
    # it, and its deleter runs when that goes.
    assert alive() is not None
    del t
    gc.collect()
    assert alive() is None


def test_an_output_can_feed_another_run(compile_model):
    exe = nimble.load(compile_model(program("identity.nir")))
    x = np.ones((1, 3), np.float32)
    t = exe.run_tensors(x=x)[0]
    u = exe.run_tensors(x=t)[0]
    assert runtime_data_pointer(u) == runtime_data_pointer(t) == x.ctypes.data


def test_empty_outputs_have_their_shape(reference, compile_model):
    ref = reference("dyn_ops")
    exe = nimble.load(compile_model(ref.onnx))
    case = next(c for c in ref.cases if c["outputs"]["nz"]["shape"][0] == 0)
    out = exe.run(**ref.inputs(case))
    assert out["nz"].shape == (0, 1) and out["nz"].dtype == np.int64
    assert out["sel"].shape == (0,)
