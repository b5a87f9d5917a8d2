"""Tensors across the boundary: NumPy and DLPack in, DLPack managed tensors out.

Outputs: the runtime hands each output over as a DLManagedTensor
(nimble_vm_take_output). A `Tensor` owns one and calls its deleter exactly
once, when the last Python reference to it (or to a NumPy view of it, or to a
DLPack capsule made from it) goes. `Tensor.numpy()` is a view: no copy.

Inputs: NumPy arrays are passed by pointer when C-contiguous (otherwise a
contiguous copy is made); objects with __dlpack__ are imported as NumPy views
of their memory; PyTorch tensors go through DLPack (bool ones, which
PyTorch 1.x cannot export over DLPack, through Tensor.numpy(), also
zero-copy).

Bool: DLPack 0.6 has no bool code; the runtime uses {kDLUInt, 1 bit, 1 lane}
with one byte per element, and accepts DLPack 0.8's {kDLBool, 8, 1} on
input. Both map to numpy.bool_; a Tensor exports bool as {kDLBool, 8, 1}.
"""
import ctypes
import sys
import threading
import weakref

import numpy as np

from . import _capi
from ._capi import DLDataType, DLManagedTensor, DLTensor, c_int64
from ._errors import InvalidArgumentError, UnimplementedError

# ---- dtypes ---------------------------------------------------------------------

_NUMPY_BY_DL = {
    (_capi.kDLFloat, 16): np.float16, (_capi.kDLFloat, 32): np.float32,
    (_capi.kDLFloat, 64): np.float64,
    (_capi.kDLInt, 8): np.int8, (_capi.kDLInt, 16): np.int16, (_capi.kDLInt, 32): np.int32,
    (_capi.kDLInt, 64): np.int64,
    (_capi.kDLUInt, 8): np.uint8, (_capi.kDLUInt, 16): np.uint16,
    (_capi.kDLUInt, 32): np.uint32, (_capi.kDLUInt, 64): np.uint64,
    (_capi.kDLUInt, 1): np.bool_, (_capi.kDLBool, 8): np.bool_,
    (_capi.kDLComplex, 64): np.complex64, (_capi.kDLComplex, 128): np.complex128,
}

_DL_CODE_NAMES = {_capi.kDLInt: "int", _capi.kDLUInt: "uint", _capi.kDLFloat: "float",
                  _capi.kDLOpaqueHandle: "handle", _capi.kDLBfloat: "bfloat",
                  _capi.kDLComplex: "complex", _capi.kDLBool: "bool"}


def dl_dtype_name(dt):
    if dt.lanes == 1 and (dt.code, dt.bits) in ((_capi.kDLUInt, 1), (_capi.kDLBool, 8)):
        return "bool"
    name = "%s%d" % (_DL_CODE_NAMES.get(dt.code, "code%d_" % dt.code), dt.bits)
    return name if dt.lanes == 1 else "%sx%d" % (name, dt.lanes)


def numpy_dtype(dt):
    """The NumPy dtype of a DLDataType; None when NumPy has none (bfloat16,
    vector lanes, handles)."""
    if dt.lanes != 1:
        return None
    t = _NUMPY_BY_DL.get((dt.code, dt.bits))
    return np.dtype(t) if t is not None else None


def dl_dtype(np_dtype, for_runtime=True):
    """The DLDataType of a NumPy dtype. Bool is the runtime's {kDLUInt, 1, 1}
    (for_runtime) or DLPack 0.8's {kDLBool, 8, 1}."""
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.bool_:
        return DLDataType(_capi.kDLUInt, 1, 1) if for_runtime else DLDataType(_capi.kDLBool, 8, 1)
    kind = {"f": _capi.kDLFloat, "i": _capi.kDLInt, "u": _capi.kDLUInt, "c": _capi.kDLComplex}
    if np_dtype.kind not in kind:
        raise InvalidArgumentError("NumPy dtype %s has no DLPack equivalent the runtime takes"
                                   % np_dtype)
    return DLDataType(kind[np_dtype.kind], np_dtype.itemsize * 8, 1)


class _ArrayInterface:
    """Hands NumPy a buffer by __array_interface__; the array keeps this
    object (and through it `owner`) alive as its base."""

    def __init__(self, owner, address, shape, dtype, strides=None, readonly=False):
        self.owner = owner
        self.__array_interface__ = {
            "version": 3, "shape": tuple(shape), "typestr": np.dtype(dtype).str,
            "descr": np.dtype(dtype).descr, "data": (address, readonly),
            "strides": tuple(strides) if strides is not None else None,
        }


def _view(owner, address, shape, dtype, strides=None, readonly=False):
    size = 1
    for d in shape:
        size *= d
    if size == 0 or not address:
        # Nothing to share: an empty array of the right shape and dtype.
        a = np.empty(shape, dtype)
        a.flags.writeable = not readonly
        return a
    return np.asarray(_ArrayInterface(owner, address, shape, dtype, strides, readonly))


# ---- outputs: Tensor ---------------------------------------------------------------

_stats_lock = threading.Lock()
_stats = {"outputs_taken": 0, "outputs_freed": 0}


def output_counts():
    """(taken, freed): how many runtime outputs this process has wrapped and
    how many it has released through their deleter. For tests and leak checks."""
    with _stats_lock:
        return _stats["outputs_taken"], _stats["outputs_freed"]


def _release_managed(address):
    managed = ctypes.cast(address, ctypes.POINTER(DLManagedTensor))
    deleter = managed.contents.deleter
    with _stats_lock:
        _stats["outputs_freed"] += 1
    if deleter:
        deleter(managed)


class Tensor:
    """An output of a run, as the runtime returned it: a DLPack managed tensor
    owned by this object.

    - `numpy()` / `np.asarray(t)`: a NumPy view of the runtime's buffer (no
      copy; read-only, since an output may be a constant of the executable);
    - `__dlpack__()` / `__dlpack_device__()`: for torch.from_dlpack,
      np.from_dlpack and other DLPack consumers (no copy);
    - `shape`, `dtype` (NumPy dtype, None where NumPy has none),
      `dl_dtype` (name), `device` ((device_type, device_id)), `data_ptr`.
    The runtime's deleter runs once, when this object and every view and
    capsule made from it are gone.
    """

    def __init__(self, managed, name="", keepalive=()):
        address = ctypes.cast(managed, ctypes.c_void_p).value
        with _stats_lock:
            _stats["outputs_taken"] += 1
        # First thing: whatever happens below, the deleter runs once.
        self._finalizer = weakref.finalize(self, _release_managed, address)
        self._managed = managed
        self._keepalive = keepalive  # inputs an output may alias
        self.name = name
        dl = managed.contents.dl_tensor
        self.shape = tuple(dl.shape[i] for i in range(dl.ndim))
        self._dl_dtype = DLDataType(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
        self.dtype = numpy_dtype(dl.dtype)
        self.dl_dtype = dl_dtype_name(dl.dtype)
        self.device = (dl.device.device_type, dl.device.device_id)
        self.data_ptr = (dl.data or 0) + dl.byte_offset
        self._strides = (tuple(dl.strides[i] for i in range(dl.ndim))
                         if dl.strides else None)

    def __repr__(self):
        return "nimble.Tensor(name=%r, shape=%r, dtype=%s)" % (self.name, self.shape, self.dl_dtype)

    @property
    def ndim(self):
        return len(self.shape)

    def numpy(self):
        """A NumPy view of the output (no copy, read-only)."""
        if self.device[0] not in (_capi.kDLCPU, _capi.kDLCUDAHost):
            raise UnimplementedError("output '%s' is on device type %d; only CPU outputs have a "
                                     "NumPy view (use __dlpack__)" % (self.name, self.device[0]))
        if self.dtype is None:
            raise UnimplementedError("output '%s' has dtype %s, which NumPy does not have"
                                     % (self.name, self.dl_dtype))
        strides = None
        if self._strides is not None:
            strides = tuple(s * self.dtype.itemsize for s in self._strides)
        return _view(self, self.data_ptr, self.shape, self.dtype, strides, readonly=True)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        return a.copy() if copy else a

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        """A "dltensor" capsule over this output's memory (no copy); it keeps
        this Tensor alive until the consumer calls its deleter."""
        if stream is not None and stream != -1 and self.device[0] == _capi.kDLCPU:
            raise BufferError("stream %r given for a CPU tensor" % (stream,))
        return _export_capsule(self, self.data_ptr, self.shape, self._strides, self._dl_dtype,
                               self.device)


# ---- DLPack export ---------------------------------------------------------------

# Every live export, by the address of its DLManagedTensor: the struct, the
# arrays it points to and the owner it keeps alive.
_exports = {}
_exports_lock = threading.Lock()


def _export_deleter_impl(managed):
    address = ctypes.cast(managed, ctypes.c_void_p).value
    with _exports_lock:
        _exports.pop(address, None)


_export_deleter = _capi.DLManagedTensorDeleter(_export_deleter_impl)
_CAPSULE_NAME = b"dltensor"
_USED_CAPSULE_NAME = b"used_dltensor"


def _capsule_destructor_impl(capsule):
    # A capsule no consumer took: release the export ourselves.
    if _capi.capsule_is_valid_raw(capsule, _CAPSULE_NAME):
        address = _capi.capsule_get_pointer_raw(capsule, _CAPSULE_NAME)
        with _exports_lock:
            _exports.pop(address, None)


_capsule_destructor = _capi.CapsuleDestructor(_capsule_destructor_impl)


def _export_capsule(owner, data_ptr, shape, strides, dtype, device):
    managed = DLManagedTensor()
    shape_arr = (c_int64 * max(len(shape), 1))(*shape)
    strides_arr = None
    managed.dl_tensor.data = data_ptr or None
    managed.dl_tensor.device.device_type = device[0]
    managed.dl_tensor.device.device_id = device[1]
    managed.dl_tensor.ndim = len(shape)
    if dtype.lanes == 1 and (dtype.code, dtype.bits) == (_capi.kDLUInt, 1):
        dtype = DLDataType(_capi.kDLBool, 8, 1)  # the runtime's bool, as DLPack 0.8 spells it
    managed.dl_tensor.dtype = dtype
    managed.dl_tensor.shape = ctypes.cast(shape_arr, ctypes.POINTER(c_int64))
    if strides is not None:
        strides_arr = (c_int64 * max(len(strides), 1))(*strides)
        managed.dl_tensor.strides = ctypes.cast(strides_arr, ctypes.POINTER(c_int64))
    managed.dl_tensor.byte_offset = 0
    managed.deleter = _export_deleter
    address = ctypes.addressof(managed)
    managed.manager_ctx = address
    with _exports_lock:
        _exports[address] = (managed, shape_arr, strides_arr, owner)
    return _capi.pythonapi.PyCapsule_New(address, _CAPSULE_NAME, _capsule_destructor)


def live_exports():
    """How many DLPack capsules made by Tensor.__dlpack__ are still alive."""
    with _exports_lock:
        return len(_exports)


# ---- inputs ------------------------------------------------------------------------


class _ImportedDLPack:
    """Owns a DLManagedTensor taken from a producer's capsule; calls its
    deleter when the last NumPy view of it goes."""

    def __init__(self, address):
        self._finalizer = weakref.finalize(self, _call_producer_deleter, address)


def _call_producer_deleter(address):
    managed = ctypes.cast(address, ctypes.POINTER(DLManagedTensor))
    if managed.contents.deleter:
        managed.contents.deleter(managed)


def from_dlpack(obj, what="input"):
    """A NumPy view (no copy) of a CPU object with __dlpack__, bool included."""
    if hasattr(obj, "__dlpack_device__"):
        device = tuple(obj.__dlpack_device__())
        if int(device[0]) not in (_capi.kDLCPU, _capi.kDLCUDAHost):
            raise UnimplementedError("%s is on DLPack device %s; only CPU tensors are taken"
                                     % (what, device))
    capsule = obj.__dlpack__()
    address = _capi.pythonapi.PyCapsule_GetPointer(capsule, _CAPSULE_NAME)
    # The capsule is consumed: from here its deleter is ours to call.
    _capi.pythonapi.PyCapsule_SetName(capsule, _USED_CAPSULE_NAME)
    owner = _ImportedDLPack(address)
    dl = ctypes.cast(address, ctypes.POINTER(DLManagedTensor)).contents.dl_tensor
    if dl.device.device_type not in (_capi.kDLCPU, _capi.kDLCUDAHost):
        raise UnimplementedError("%s is on DLPack device type %d; only CPU tensors are taken"
                                 % (what, dl.device.device_type))
    dtype = numpy_dtype(dl.dtype)
    if dtype is None:
        raise UnimplementedError("%s has DLPack dtype %s, which the runtime does not take"
                                 % (what, dl_dtype_name(dl.dtype)))
    shape = tuple(dl.shape[i] for i in range(dl.ndim))
    strides = (tuple(dl.strides[i] * dtype.itemsize for i in range(dl.ndim))
               if dl.strides else None)
    return _view(owner, (dl.data or 0) + dl.byte_offset, shape, dtype, strides)


def _torch_tensor(value):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _convert(value, declared, what):
    """A Python number or (nested) list as an array of the declared dtype;
    a conversion that would change a value (1.5 to an integer, -1 or 300 to
    uint8, 2 to bool) is refused. Floats may round to a narrower float."""
    try:
        natural = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError("%s: cannot make an array of %r: %s" % (what, value, e))
    if declared is None or natural.dtype == declared or natural.dtype.kind not in "biufc":
        return natural
    with np.errstate(all="ignore"):
        converted = natural.astype(declared)
        exact = (natural.dtype.kind in "fc" and declared.kind in "fc") or \
            np.array_equal(converted.astype(natural.dtype), natural)
    if not exact:
        raise InvalidArgumentError("%s: %r does not fit the declared dtype %s"
                                   % (what, value, declared))
    return converted


def to_array(value, declared_dtype, what):
    """The input as a NumPy array the runtime can read in place: C-contiguous,
    aligned, native byte order. Arrays and DLPack tensors keep their dtype
    (a mismatch is the runtime's error to report); Python scalars and lists
    take the declared one."""
    if isinstance(value, Tensor):
        array = value.numpy()
    elif isinstance(value, np.ndarray):
        array = value
    elif _torch_tensor(value):
        t = value.detach()
        if t.device.type != "cpu":
            raise UnimplementedError("%s is a PyTorch tensor on %s; only CPU tensors are taken"
                                     % (what, t.device))
        if t.dtype == sys.modules["torch"].bool:
            array = t.numpy()  # PyTorch 1.x has no bool over DLPack; .numpy() shares memory
        else:
            array = from_dlpack(t, what)
    elif hasattr(value, "__dlpack__"):
        array = from_dlpack(value, what)
    elif isinstance(value, np.generic):
        array = np.asarray(value)
    else:
        array = _convert(value, declared_dtype, what)
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if not (array.flags.c_contiguous and array.flags.aligned):
        array = np.ascontiguousarray(array)
    return array


class InputTensor:
    """A DLTensor over a NumPy array, with the shape array it points to."""

    def __init__(self, array):
        self.array = array
        self.shape = (c_int64 * max(array.ndim, 1))(*array.shape)
        self.dl = DLTensor()
        self.dl.data = array.ctypes.data or None
        self.dl.device.device_type = _capi.kDLCPU
        self.dl.device.device_id = 0
        self.dl.ndim = array.ndim
        self.dl.dtype = dl_dtype(array.dtype)
        self.dl.shape = ctypes.cast(self.shape, ctypes.POINTER(c_int64))
        self.dl.strides = None
        self.dl.byte_offset = 0
