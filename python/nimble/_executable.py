"""Executables, their entries, and the VMs that run them.

A loaded executable is immutable and may be shared by any number of threads
(nimble/runtime.h); a VM is single-threaded. An Executable therefore keeps
one VM per thread that runs it, created on first use and destroyed when the
thread ends or the Executable goes. The runtime's calls run without the GIL
(ctypes releases it), so threads run models in parallel.
"""
import collections
import ctypes
import os
import threading
import warnings
import weakref

import numpy as np

from . import _capi
from ._errors import Error, InvalidArgumentError, NotFoundError, UnimplementedError, raise_status
from ._tensor import InputTensor, Tensor, dl_dtype_name, numpy_dtype, to_array

TensorInfo = collections.namedtuple("TensorInfo", "name dtype shape")
TensorInfo.__doc__ = """An entry's input or output as the executable declares it.

name:  the name in the model ("x", "input.1")
dtype: a NumPy dtype; the string "adt" for an algebraic data type input (a
       tree); the DLPack name ("bfloat16") where NumPy has none
shape: a tuple of dims: an int, a str for a named symbolic dim ("batch"; equal
       names bind to equal sizes), or None for Any
"""


def _lib():
    if _capi.runtime is None:
        raise Error("libnimble_runtime.so not found: tried " + _capi.runtime_path
                    + " (set NIMBLE_RUNTIME_LIBRARY to its path)", code="NOT_FOUND", code_value=2)
    return _capi.runtime


def _check(status, context=None):
    if status:
        raise_status(_lib(), status, context)


def _str(b):
    return b.decode("utf-8", "replace") if b is not None else None


def _describe(info):
    if _lib().nimble_tensor_info_is_adt(ctypes.byref(info)):
        return TensorInfo(_str(info.name), "adt", ())
    dims = []
    for d in range(info.ndim):
        dim = info.dims[d]
        if dim.symbol is None:
            dims.append(int(dim.value))
        elif dim.symbol == b"":
            dims.append(None)
        else:
            dims.append(_str(dim.symbol))
    dt = numpy_dtype(info.dtype)
    return TensorInfo(_str(info.name), dt if dt is not None else dl_dtype_name(info.dtype),
                      tuple(dims))


class Adt:
    """A value of an algebraic data type, for an ADT input (a tree):
    a constructor name ("Leaf", or "Tree.Leaf") and its fields, each an
    Adt or a tensor (anything run() takes; numbers take the field's dtype).

        leaf = lambda w: nimble.Adt("Leaf", w)
        tree = nimble.Adt("Node", leaf(3), nimble.Adt("Node", leaf(7), leaf(1)))
        exe.run(tree=tree, emb=emb, ...)

    The whole value is checked against the input's declared type when it is
    set: an error names the path to the fault ("at .1.0")."""

    __slots__ = ("constructor", "fields")

    def __init__(self, constructor, *fields):
        self.constructor = str(constructor)
        self.fields = fields

    def __repr__(self):
        return "Adt(%s)" % ", ".join([repr(self.constructor)] + [repr(f) for f in self.fields])


class Outputs(dict):
    """The outputs of a run: a dict keyed by output name, in the entry's
    order, that also takes an index (outputs[0])."""

    def __getitem__(self, key):
        if isinstance(key, int):
            return list(self.values())[key]
        return dict.__getitem__(self, key)


class _VM:
    def __init__(self, exe_handle, options):
        handle = ctypes.c_void_p()
        _check(_lib().nimble_vm_create(exe_handle, ctypes.byref(options), ctypes.byref(handle)))
        self.handle = handle
        self.pending = ()  # inputs the VM points at until the next invoke
        self._finalizer = weakref.finalize(self, _lib().nimble_vm_destroy, handle)


class Entry:
    """One entry function of an executable (most have one, "main")."""

    def __init__(self, exe, info_ptr):
        self._exe = exe
        self._info_ptr = info_ptr  # borrowed from the executable, which exe keeps
        info = info_ptr.contents
        self.name = _str(info.name)
        self._name_b = info.name  # bytes, borrowed from the executable
        self.inputs = tuple(_describe(info.inputs[i]) for i in range(info.num_inputs))
        self.outputs = tuple(_describe(info.outputs[i]) for i in range(info.num_outputs))

    def __repr__(self):
        return "nimble.Entry(%r, inputs=%r, outputs=%r)" % (self.name, self.inputs, self.outputs)

    def _bind(self, args, kwargs):
        """The inputs in declaration order, from positional arguments, one
        mapping, or keywords."""
        if len(args) == 1 and isinstance(args[0], collections.abc.Mapping) and not kwargs:
            kwargs, args = dict(args[0]), ()
        names = [i.name for i in self.inputs]
        if len(args) > len(names):
            raise InvalidArgumentError("entry '%s' takes %d inputs (%s), %d given"
                                       % (self.name, len(names), ", ".join(names), len(args)))
        values = list(args) + [None] * (len(names) - len(args))
        given = [True] * len(args) + [False] * (len(names) - len(args))
        for key, value in kwargs.items():
            if key not in names:
                raise InvalidArgumentError("entry '%s' has no input '%s' (its inputs: %s)"
                                           % (self.name, key, ", ".join(names)))
            i = names.index(key)
            if given[i]:
                raise InvalidArgumentError("entry '%s': input '%s' given twice" % (self.name, key))
            values[i], given[i] = value, True
        missing = [n for n, g in zip(names, given) if not g]
        if missing:
            raise InvalidArgumentError("entry '%s': missing input%s %s (its inputs: %s)"
                                       % (self.name, "s" if len(missing) > 1 else "",
                                          ", ".join("'%s'" % m for m in missing),
                                          ", ".join(names)))
        return values

    def _adt_value(self, index, adt, what):
        """A nimble_value for ADT input `index` (caller releases it)."""
        lib = _lib()
        if not isinstance(adt, Adt):
            raise InvalidArgumentError("%s is an ADT value (a tree): give a nimble.Adt, not %s"
                                       % (what, type(adt).__name__))
        tag, num_fields = ctypes.c_int32(), ctypes.c_uint32()
        name = adt.constructor.encode()
        _check(lib.nimble_entry_find_constructor(self._info_ptr, index, name, ctypes.byref(tag),
                                                 ctypes.byref(num_fields)))
        fields = []
        try:
            for k, field in enumerate(adt.fields):
                if isinstance(field, Adt):
                    fields.append(self._adt_value(index, field, what))
                    continue
                declared = None
                if k < num_fields.value:
                    fd = _capi.AdtField()
                    _check(lib.nimble_entry_constructor_field(self._info_ptr, index, name, k,
                                                              ctypes.byref(fd)))
                    if fd.is_adt:
                        raise InvalidArgumentError(
                            "%s: field %d of %s is a %s value: give a nimble.Adt, not %s"
                            % (what, k, adt.constructor,
                               ctypes.string_at(fd.adt_type, fd.adt_type_len).decode(),
                               type(field).__name__))
                    declared = numpy_dtype(fd.dtype)
                t = InputTensor(to_array(field, declared, "%s: field %d of %s"
                                         % (what, k, adt.constructor)))
                value = ctypes.c_void_p()
                _check(lib.nimble_value_from_tensor(ctypes.byref(t.dl), ctypes.byref(value)))
                fields.append(value)
            array = (ctypes.c_void_p * max(len(fields), 1))(*[f.value for f in fields])
            out = ctypes.c_void_p()
            _check(lib.nimble_value_adt(tag.value, array, len(fields), ctypes.byref(out)))
            return out
        finally:
            for f in fields:
                lib.nimble_value_release(f)

    def run_tensors(self, *args, **kwargs):
        """Runs the entry; the outputs as nimble.Tensor objects (DLPack managed
        tensors from the runtime), in an Outputs dict."""
        values = self._bind(args, kwargs)
        lib = _lib()
        inputs, adts = [], []
        try:
            for index, (info, value) in enumerate(zip(self.inputs, values)):
                what = "entry '%s': input '%s'" % (self.name, info.name)
                if info.dtype == "adt":
                    adts.append(self._adt_value(index, value, what))
                    inputs.append(None)
                    continue
                declared = info.dtype if isinstance(info.dtype, np.dtype) else None
                inputs.append(InputTensor(to_array(value, declared, what)))
            vm = self._exe._thread_vm()
            arrays = tuple(t.array for t in inputs if t is not None)
            vm.pending = arrays
            remaining = iter(adts)
            for i, t in enumerate(inputs):
                if t is None:
                    _check(lib.nimble_vm_set_input_value(vm.handle, self._name_b, i, next(remaining)))
                else:
                    _check(lib.nimble_vm_set_input(vm.handle, self._name_b, i, ctypes.byref(t.dl)))
        finally:
            # The VM holds its own references to the values it was given.
            for v in adts:
                lib.nimble_value_release(v)
        _check(lib.nimble_vm_invoke(vm.handle, self._name_b))
        vm.pending = ()
        outputs = Outputs()
        n = lib.nimble_vm_num_outputs(vm.handle)
        for k in range(n):
            managed = ctypes.POINTER(_capi.DLManagedTensor)()
            _check(lib.nimble_vm_take_output(vm.handle, k, ctypes.byref(managed)))
            name = self.outputs[k].name if k < len(self.outputs) else "output%d" % k
            # An output may be one of the inputs: it keeps them alive.
            outputs[name] = Tensor(managed, name, keepalive=arrays)
        return outputs

    def run(self, *args, **kwargs):
        """Runs the entry on inputs given by position, by name (keywords or
        one dict: names that are not identifiers, "input.1") or both, as NumPy
        arrays, objects with __dlpack__, PyTorch tensors, nimble.Tensor outputs
        of another run, or Python numbers and lists (which take the declared
        dtype). Returns an Outputs dict of read-only NumPy arrays that share
        memory with the runtime's output buffers (no copy)."""
        tensors = self.run_tensors(*args, **kwargs)
        return Outputs((name, t.numpy()) for name, t in tensors.items())

    __call__ = run


class Executable:
    """A loaded executable (nimble.load, nimble.fetch).

    exe.run(x=...) / exe.inputs / exe.outputs use the entry "main" (or the
    only entry); exe.entry(name) gives another. Thread-safe: each thread
    runs on its own VM.
    """

    def __init__(self, handle, source, num_threads=0, memory_cap_bytes=0, max_call_depth=0):
        lib = _lib()
        self._handle = handle
        self._finalizer = weakref.finalize(self, lib.nimble_executable_release, handle)
        self.source = source
        self.target = _str(lib.nimble_executable_target(handle))
        self.producer = _str(lib.nimble_executable_producer(handle))
        self.source_digest = _str(lib.nimble_executable_source_digest(handle))
        self.format_version = lib.nimble_executable_format_version(handle)
        # nimble_vm_options_init writes sizeof(nimble_vm_options_t) bytes: into
        # a buffer large enough for any version, then checked against ours.
        buf = ctypes.create_string_buffer(256)
        lib.nimble_vm_options_init(buf)
        options = _capi.VMOptions.from_buffer_copy(buf)
        if options.struct_size != ctypes.sizeof(_capi.VMOptions):
            raise Error("libnimble_runtime.so's nimble_vm_options_t is %d bytes, this package's "
                        "%d: the library and the package are from different versions"
                        % (options.struct_size, ctypes.sizeof(_capi.VMOptions)),
                        code="FAILED_PRECONDITION", code_value=7)
        options.num_threads = num_threads
        options.memory_cap_bytes = memory_cap_bytes
        options.max_call_depth = max_call_depth
        self._options = options
        self._local = threading.local()
        self._entries = collections.OrderedDict()
        for i in range(lib.nimble_executable_num_entries(handle)):
            e = Entry(self, lib.nimble_executable_entry_at(handle, i))
            self._entries[e.name] = e

    def __repr__(self):
        return "nimble.Executable(%r, target=%r, entries=%r)" % (self.source, self.target,
                                                                 list(self._entries))

    def _thread_vm(self):
        vm = getattr(self._local, "vm", None)
        if vm is None:
            vm = _VM(self._handle, self._options)
            self._local.vm = vm
        return vm

    @property
    def entries(self):
        """The entry names."""
        return tuple(self._entries)

    def entry(self, name=None):
        """The entry `name`; without a name "main", or the only entry."""
        if name is None:
            if "main" in self._entries:
                return self._entries["main"]
            if len(self._entries) == 1:
                return next(iter(self._entries.values()))
            raise NotFoundError("%s has no entry 'main' and %d others (%s): name one"
                                % (self.source, len(self._entries), ", ".join(self._entries)))
        if name not in self._entries:
            raise NotFoundError("%s has no entry '%s' (its entries: %s)"
                                % (self.source, name, ", ".join(self._entries)))
        return self._entries[name]

    @property
    def inputs(self):
        return self.entry().inputs

    @property
    def outputs(self):
        return self.entry().outputs

    def run(self, *args, **kwargs):
        return self.entry().run(*args, **kwargs)

    def run_tensors(self, *args, **kwargs):
        return self.entry().run_tensors(*args, **kwargs)

    __call__ = run

    def memory_stats(self):
        """The calling thread's VM's CPU pool: bytes_in_use, bytes_reserved,
        peak_bytes_reserved, system_allocations, pool_hits."""
        stats = _capi.MemoryStats()
        _check(_lib().nimble_vm_memory_stats(self._thread_vm().handle, _capi.kDLCPU,
                                             ctypes.byref(stats)))
        return {name: int(getattr(stats, name)) for name, _ in _capi.MemoryStats._fields_}

    def trim_memory(self):
        """Returns the calling thread's VM's cached memory to the system."""
        _lib().nimble_vm_trim_memory(self._thread_vm().handle)


def load(source, num_threads=0, memory_cap_bytes=0, max_call_depth=0):
    """Loads an executable: a `.nimble` file, a directory of parts (as
    `nimble fetch -o DIR` and `nimble compile --emit-parts DIR` write them),
    or the bytes of a `.nimble` image. num_threads: kernel threads per VM (0:
    the calling thread only); memory_cap_bytes: per VM (0: no cap)."""
    lib = _lib()
    handle = ctypes.c_void_p()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        _check(lib.nimble_executable_load_memory(data, len(data), 0, ctypes.byref(handle)))
        label = "<%d bytes>" % len(data)
    else:
        path = os.fspath(source)
        label = path
        path_b = os.fsencode(path)
        if os.path.isdir(path):
            parts = ctypes.POINTER(_capi.ExecutablePart)()
            n = ctypes.c_size_t()
            _check(lib.nimble_executable_read_part_dir(path_b, ctypes.byref(parts), ctypes.byref(n)))
            try:
                _check(lib.nimble_executable_load_parts(parts, n.value, 0, ctypes.byref(handle)))
            finally:
                lib.nimble_executable_parts_free(parts, n.value)
        else:
            _check(lib.nimble_executable_load_file(path_b, ctypes.byref(handle)))
    return Executable(handle, label, num_threads, memory_cap_bytes, max_call_depth)


def fetch(reference, cache_dir=None, token=None, offline=False, connect_timeout_ms=None,
          max_attempts=None, num_threads=0, memory_cap_bytes=0, trusted_keys=None):
    """Fetches an executable from an artifact store into the verified local
    cache and loads it (the runtime's fetcher, nimble/fetch.h):
    "http://HOST:PORT/team/model:x86", ".../team/model@sha256:<hex>", or
    "team/model:x86" in the store $NIMBLE_STORE names. cache_dir defaults to
    $NIMBLE_CACHE_DIR, $XDG_CACHE_HOME/nimble, ~/.cache/nimble; token to
    $NIMBLE_TOKEN. offline=True loads from the cache only. trusted_keys (a
    file of "ed25519 <hex>" lines; default $NIMBLE_TRUSTED_KEYS) loads only
    an artifact the farm signed (docs/fetch.md, "Trust"); without keys a
    warning says the publisher is not verified. The result's `fetch_stats`
    says what was downloaded."""
    flib = _capi.fetch_library()
    if flib is None:
        raise UnimplementedError("nimble.fetch needs the runtime's fetcher: "
                                 + (_capi.fetch_error() or "libnimble_fetch.so not found"))
    ref = str(reference)
    if not flib.nimble_fetch_looks_like_reference(ref.encode()):
        store = os.environ.get("NIMBLE_STORE")
        if not store:
            raise InvalidArgumentError("'%s' is not a store reference (http://HOST:PORT/NAME:TAG) "
                                       "and NIMBLE_STORE is not set to name a store" % ref)
        ref = store.rstrip("/") + "/" + ref
    buf = ctypes.create_string_buffer(512)
    flib.nimble_fetch_options_init(buf)
    options = _capi.FetchOptions.from_buffer_copy(buf)
    if options.struct_size != ctypes.sizeof(_capi.FetchOptions):
        raise Error("libnimble_fetch.so's nimble_fetch_options_t is %d bytes, this package's %d"
                    % (options.struct_size, ctypes.sizeof(_capi.FetchOptions)),
                    code="FAILED_PRECONDITION", code_value=7)
    keep = []
    if cache_dir is not None:
        keep.append(os.fsencode(os.fspath(cache_dir)))
        options.cache_dir = keep[-1]
    if token is not None:
        keep.append(token.encode())
        options.token = keep[-1]
    if connect_timeout_ms is not None:
        options.connect_timeout_ms = connect_timeout_ms
    if max_attempts is not None:
        options.max_attempts = max_attempts
    if trusted_keys is not None:
        keep.append(os.fsencode(os.fspath(trusted_keys)))
        options.trusted_keys = keep[-1]
    elif not os.environ.get("NIMBLE_TRUSTED_KEYS"):
        warnings.warn("%s: the publisher of this artifact is not verified (no trusted keys: "
                      "set NIMBLE_TRUSTED_KEYS or trusted_keys=; see docs/fetch.md)" % ref,
                      stacklevel=2)
    options.offline = 1 if offline else 0
    handle = ctypes.c_void_p()
    stats = _capi.FetchStats()
    _check(flib.nimble_fetch_artifact_stats(ctypes.byref(options), ref.encode(),
                                            ctypes.byref(handle), ctypes.byref(stats)))
    exe = Executable(handle, ref, num_threads, memory_cap_bytes)
    exe.fetch_stats = {
        "blobs_fetched": stats.blobs_fetched, "bytes_fetched": stats.bytes_fetched,
        "blobs_from_cache": stats.blobs_from_cache, "offline": bool(stats.offline),
        "elapsed_ms": stats.elapsed_ms, "manifest_digest": _str(stats.manifest_digest),
    }
    return exe
