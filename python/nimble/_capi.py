"""ctypes bindings of the runtime's C API (nimble/runtime.h, nimble/fetch.h).

Finds libnimble_runtime.so (and libnimble_fetch.so, optional) in this order:
  1. $NIMBLE_RUNTIME_LIBRARY (a path to libnimble_runtime.so*) and
     $NIMBLE_FETCH_LIBRARY;
  2. a build tree next to this source tree (python/nimble -> build/runtime/),
     for in-place use with PYTHONPATH=python;
  3. the dynamic linker's search path (LD_LIBRARY_PATH, ld.so.conf: an install
     under /usr or /usr/local), as libnimble_runtime.so.<major>;
  4. pkg-config's libdir for nimble-runtime (PKG_CONFIG_PATH).
The fetcher is looked for beside the runtime library first.
"""
import ctypes
import os
import subprocess
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double, c_int, c_int32,
                    c_int64, c_long, c_size_t, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

SOVERSION = "0"

# ---- DLPack 0.6 (dlpack/dlpack.h) -------------------------------------------

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3

kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLOpaqueHandle = 3
kDLBfloat = 4
kDLComplex = 5
kDLBool = 6  # DLPack 0.8; the runtime accepts it on input (8 bits)


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


DLManagedTensorDeleter = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", DLManagedTensorDeleter)]

# ---- nimble/runtime.h ---------------------------------------------------------


class SigDim(Structure):
    _fields_ = [("value", c_int64), ("symbol", c_char_p)]


class TensorInfoC(Structure):
    _fields_ = [("name", c_char_p), ("dtype", DLDataType), ("device", DLDevice),
                ("ndim", c_int32), ("dims", POINTER(SigDim))]


class EntryInfoC(Structure):
    _fields_ = [("name", c_char_p), ("num_inputs", c_uint32), ("num_outputs", c_uint32),
                ("inputs", POINTER(TensorInfoC)), ("outputs", POINTER(TensorInfoC))]


class VMOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("memory_cap_bytes", c_uint64),
                ("num_threads", c_uint32), ("max_call_depth", c_uint32), ("fixed_threads", c_uint32)]


class MemoryStats(Structure):
    _fields_ = [("bytes_in_use", c_uint64), ("bytes_reserved", c_uint64),
                ("peak_bytes_reserved", c_uint64), ("system_allocations", c_uint64),
                ("pool_hits", c_uint64)]


class AdtField(Structure):
    _fields_ = [("is_adt", c_int32), ("adt_type", c_void_p), ("adt_type_len", c_size_t),
                ("dtype", DLDataType), ("ndim", c_int32), ("dims", c_int64 * 32)]


class ExecutablePart(Structure):
    _fields_ = [("kind", c_int), ("data", c_void_p), ("size", c_size_t)]


# ---- nimble/fetch.h -------------------------------------------------------------

FetchEventFn = CFUNCTYPE(None, c_void_p, c_void_p)


class FetchOptions(Structure):
    _fields_ = [("struct_size", c_size_t), ("cache_dir", c_char_p), ("token", c_char_p),
                ("connect_timeout_ms", c_long), ("stall_timeout_ms", c_long),
                ("max_attempts", c_int), ("max_blob_size", c_uint64), ("offline", c_int),
                ("load_flags", c_uint32), ("on_event", FetchEventFn), ("event_user", c_void_p),
                ("trusted_keys", c_char_p)]


class FetchStats(Structure):
    _fields_ = [("blobs_fetched", c_uint32), ("bytes_fetched", c_uint64),
                ("blobs_from_cache", c_uint32), ("offline", c_int), ("elapsed_ms", c_double),
                ("manifest_digest", c_char * 72)]


Status = c_void_p  # nimble_status_t: NULL on success

_RUNTIME_PROTOTYPES = {
    # status.h
    "nimble_status_code": (c_int, [Status]),
    "nimble_status_message": (c_char_p, [Status]),
    "nimble_status_code_name": (c_char_p, [c_int]),
    "nimble_status_free": (None, [Status]),
    # loading
    "nimble_executable_load_file": (Status, [c_char_p, POINTER(c_void_p)]),
    "nimble_executable_load_memory": (Status, [c_void_p, c_size_t, c_uint32, POINTER(c_void_p)]),
    "nimble_executable_load_parts": (Status, [POINTER(ExecutablePart), c_size_t, c_uint32,
                                              POINTER(c_void_p)]),
    "nimble_executable_read_part_dir": (Status, [c_char_p, POINTER(POINTER(ExecutablePart)),
                                                 POINTER(c_size_t)]),
    "nimble_executable_parts_free": (None, [POINTER(ExecutablePart), c_size_t]),
    "nimble_executable_retain": (None, [c_void_p]),
    "nimble_executable_release": (None, [c_void_p]),
    # signature
    "nimble_executable_target": (c_char_p, [c_void_p]),
    "nimble_executable_producer": (c_char_p, [c_void_p]),
    "nimble_executable_source_digest": (c_char_p, [c_void_p]),
    "nimble_executable_format_version": (c_uint32, [c_void_p]),
    "nimble_executable_num_entries": (c_uint32, [c_void_p]),
    "nimble_executable_entry_at": (POINTER(EntryInfoC), [c_void_p, c_uint32]),
    "nimble_tensor_info_is_adt": (c_int, [POINTER(TensorInfoC)]),
    # ADT values
    "nimble_entry_find_constructor": (Status, [POINTER(EntryInfoC), c_uint32, c_char_p,
                                               POINTER(c_int32), POINTER(c_uint32)]),
    "nimble_entry_constructor_field": (Status, [POINTER(EntryInfoC), c_uint32, c_char_p, c_uint32,
                                                POINTER(AdtField)]),
    "nimble_value_from_tensor": (Status, [POINTER(DLTensor), POINTER(c_void_p)]),
    "nimble_value_adt": (Status, [c_int32, POINTER(c_void_p), c_uint32, POINTER(c_void_p)]),
    "nimble_value_release": (None, [c_void_p]),
    "nimble_vm_set_input_value": (Status, [c_void_p, c_char_p, c_uint32, c_void_p]),
    # VM
    "nimble_vm_options_init": (None, [c_void_p]),
    "nimble_vm_create": (Status, [c_void_p, POINTER(VMOptions), POINTER(c_void_p)]),
    "nimble_vm_destroy": (None, [c_void_p]),
    "nimble_vm_set_input": (Status, [c_void_p, c_char_p, c_uint32, POINTER(DLTensor)]),
    "nimble_vm_invoke": (Status, [c_void_p, c_char_p]),
    "nimble_vm_num_outputs": (c_uint32, [c_void_p]),
    "nimble_vm_take_output": (Status, [c_void_p, c_uint32, POINTER(POINTER(DLManagedTensor))]),
    "nimble_vm_memory_stats": (Status, [c_void_p, c_int, POINTER(MemoryStats)]),
    "nimble_vm_trim_memory": (None, [c_void_p]),
    "nimble_runtime_version": (c_char_p, []),
    "nimble_runtime_blas_name": (c_char_p, []),
    "nimble_runtime_sgemm_name": (c_char_p, []),
}

_FETCH_PROTOTYPES = {
    "nimble_fetch_options_init": (None, [c_void_p]),
    "nimble_fetch_looks_like_reference": (c_int, [c_char_p]),
    "nimble_fetch_artifact_stats": (Status, [POINTER(FetchOptions), c_char_p, POINTER(c_void_p),
                                             POINTER(FetchStats)]),
}


def _declare(lib, prototypes):
    for name, (restype, argtypes) in prototypes.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def _candidates(env_var, stem):
    """Paths (or bare names for the dynamic linker) to try, in order; lazy,
    so pkg-config only runs when nothing before it was found."""
    if os.environ.get(env_var):
        yield os.path.abspath(os.environ[env_var])
    here = os.path.dirname(os.path.abspath(__file__))
    for build in (os.environ.get("NIMBLE_BUILD_DIR"),
                  os.path.join(here, os.pardir, os.pardir, "build")):
        if build:
            yield os.path.normpath(os.path.join(os.path.abspath(build), "runtime",
                                                "%s.so.%s" % (stem, SOVERSION)))
    yield "%s.so.%s" % (stem, SOVERSION)
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "nimble-runtime"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        libdir = ""
    if libdir:
        yield os.path.join(libdir, "%s.so.%s" % (stem, SOVERSION))


def _load_runtime():
    tried = []
    for path in _candidates("NIMBLE_RUNTIME_LIBRARY", "libnimble_runtime"):
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            # RTLD_GLOBAL: libnimble_fetch.so finds the runtime already loaded.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    return None, "; ".join(tried)


runtime, runtime_path = _load_runtime()
if runtime is not None:
    _declare(runtime, _RUNTIME_PROTOTYPES)

_fetch = None
_fetch_error = None


def _unique(items):
    seen = set()
    return [i for i in items if not (i in seen or seen.add(i))]


def fetch_library():
    """The fetcher (libnimble_fetch.so), loaded on first use; None when absent
    (fetch_error() then says why)."""
    global _fetch, _fetch_error
    if _fetch is not None or _fetch_error is not None:
        return _fetch
    names = []
    if os.environ.get("NIMBLE_FETCH_LIBRARY"):
        names.append(os.path.abspath(os.environ["NIMBLE_FETCH_LIBRARY"]))
    if runtime_path and os.sep in runtime_path:
        names.append(os.path.join(os.path.dirname(runtime_path),
                                  "libnimble_fetch.so.%s" % SOVERSION))
    tried = []
    for path in _unique(names + list(_candidates("NIMBLE_FETCH_LIBRARY", "libnimble_fetch"))):
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            _fetch = _declare(ctypes.CDLL(path), _FETCH_PROTOTYPES)
            return _fetch
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    _fetch_error = "libnimble_fetch.so not found: tried " + "; ".join(tried)
    return None


def fetch_error():
    return _fetch_error


# ---- Python's capsule API, for DLPack -------------------------------------------

pythonapi = ctypes.pythonapi
CapsuleDestructor = CFUNCTYPE(None, c_void_p)
pythonapi.PyCapsule_New.restype = ctypes.py_object
pythonapi.PyCapsule_New.argtypes = [c_void_p, c_char_p, CapsuleDestructor]
pythonapi.PyCapsule_GetPointer.restype = c_void_p
pythonapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, c_char_p]
pythonapi.PyCapsule_SetName.restype = c_int
pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, c_char_p]
pythonapi.PyCapsule_IsValid.restype = c_int
pythonapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, c_char_p]
# In a capsule's destructor the capsule is being freed: it is passed as a
# bare pointer, never as a Python object (which would resurrect it).
capsule_is_valid_raw = ctypes.PYFUNCTYPE(c_int, c_void_p, c_char_p)(
    ("PyCapsule_IsValid", pythonapi))
capsule_get_pointer_raw = ctypes.PYFUNCTYPE(c_void_p, c_void_p, c_char_p)(
    ("PyCapsule_GetPointer", pythonapi))
