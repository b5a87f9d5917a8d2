"""The files both model generators write for a model: .npy tensors with
their json entries, the json description of an ONNX graph's inputs and
outputs and op counts, and the clean-up before a model is made again.
Layout under OUTDIR: NAME.onnx, NAME.json, NAME.ref/<case>/*.npy."""
import os
import shutil
from collections import Counter

import numpy as np
import onnx

# ONNX TensorProto element types, as the json names them.
ELEM_NAMES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
              10: "float16", 11: "float64"}


def save_npy(path, array, keep_float64=False):
    """Writes a C-ordered, little-endian .npy (format 1.0); 0-d stays 0-d.
    float64 is narrowed to float32 unless keep_float64 (the reference
    models' tensors are float32 or int64; the real models keep every
    dtype)."""
    a = np.asarray(array)
    if a.dtype == np.float64 and not keep_float64:
        a = a.astype(np.float32)
    # np.array keeps a 0-d scalar 0-d (np.ascontiguousarray would make it [1]).
    a = np.array(a, dtype=a.dtype.newbyteorder("<"), order="C")
    with open(path, "wb") as f:
        np.save(f, a, allow_pickle=False)
    return a


def tensor_entry(outdir, rel, array, keep_float64=False):
    """Saves `array` at OUTDIR/rel and returns its json description."""
    a = save_npy(os.path.join(outdir, rel), array, keep_float64)
    entry = {"file": rel, "dtype": str(a.dtype), "shape": list(a.shape)}
    if a.size and a.dtype == np.float32:
        entry["absmax"] = float(np.abs(a).max())
    return entry


def value_info(vi):
    """A graph input or output: name, dtype and dims (ints, symbols, "?"),
    or shape None when the rank is unknown."""
    t = vi.type.tensor_type
    info = {"name": vi.name, "dtype": ELEM_NAMES.get(t.elem_type, "onnx_type_%d" % t.elem_type)}
    if t.HasField("shape"):
        dims = []
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param"):
                dims.append(d.dim_param)
            else:
                dims.append("?")
        info["shape"] = dims
    else:
        info["shape"] = None  # rank unknown
    return info


def op_counts(model):
    """(ops of the main graph, ops of all nested subgraphs), sorted by name."""
    main = Counter(n.op_type for n in model.graph.node)
    nested = Counter()
    pending = [model.graph]
    while pending:
        for node in pending.pop().node:
            for attr in node.attribute:
                subgraphs = ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else []) + list(attr.graphs)
                for g in subgraphs:
                    nested.update(n.op_type for n in g.node)
                    pending.append(g)
    return dict(sorted(main.items())), dict(sorted(nested.items()))


def as_tuple(outs):
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def clear_model(outdir, name):
    """Removes whatever an earlier run left for `name`: NAME.onnx,
    NAME.json, NAME.ref/ and a NAME/ folder (treelstm's)."""
    for rel in (name + ".onnx", name + ".json"):
        if os.path.exists(os.path.join(outdir, rel)):
            os.remove(os.path.join(outdir, rel))
    for rel in (name + ".ref", name):
        if os.path.isdir(os.path.join(outdir, rel)):
            shutil.rmtree(os.path.join(outdir, rel))
