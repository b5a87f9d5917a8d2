"""Nimble's Python package: run compiled Nimble executables from Python.

    import numpy as np, nimble
    exe = nimble.load("mlp.nimble")                 # or nimble.fetch("http://store:5000/team/mlp:x86")
    print(exe.inputs)                                # (TensorInfo(name='x', dtype=float32, shape=('batch', 784)),)
    y = exe.run(x=np.random.rand(3, 784).astype(np.float32))["y"]

Pure Python over the runtime's C API (libnimble_runtime.so, by ctypes) and
NumPy; no compiled extension. See docs/python.md.
"""
from ._errors import (AlreadyExistsError, CancelledError, DataLossError, DeadlineExceededError,
                      Error, FailedPreconditionError, InternalError, InvalidArgumentError,
                      IOFailureError, NotFoundError, OutOfRangeError, PermissionDeniedError,
                      ResourceExhaustedError, UnauthenticatedError, UnavailableError,
                      UnimplementedError)
from ._executable import Adt, Entry, Executable, Outputs, TensorInfo, fetch, load
from ._tensor import Tensor, output_counts, live_exports
from . import _capi

__version__ = "0.1.0"

__all__ = [
    "load", "fetch", "Adt", "Executable", "Entry", "Outputs", "TensorInfo", "Tensor", "Error",
    "InvalidArgumentError", "NotFoundError", "AlreadyExistsError", "PermissionDeniedError",
    "UnauthenticatedError", "ResourceExhaustedError", "FailedPreconditionError",
    "OutOfRangeError", "UnimplementedError", "InternalError", "UnavailableError",
    "DataLossError", "DeadlineExceededError", "CancelledError", "IOFailureError",
    "runtime_version", "runtime_library", "blas_name", "sgemm_name", "output_counts", "live_exports",
]


def runtime_library():
    """The path of the libnimble_runtime.so in use."""
    return _capi.runtime_path if _capi.runtime is not None else None


def runtime_version():
    """The runtime library's version ("0.1.0")."""
    from ._executable import _lib
    return _lib().nimble_runtime_version().decode()


def blas_name():
    """The BLAS the runtime's kernels use ("OpenBLAS ...", or "none (why)")."""
    from ._executable import _lib
    return _lib().nimble_runtime_blas_name().decode()


def sgemm_name():
    """What the kernels' matrix products run on: the runtime's own kernels,
    the BLAS, or either per product ("own (avx512) ...", docs/vm.md)."""
    from ._executable import _lib
    return _lib().nimble_runtime_sgemm_name().decode()
