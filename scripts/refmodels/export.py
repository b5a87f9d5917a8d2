"""Writing one reference model: the ONNX export, its description (NAME.json)
and the input/output tensors of every case as .npy files.

Layout under OUTDIR (all paths in the json are relative to OUTDIR):
  NAME.onnx
  NAME.json
  NAME.ref/<case>/<tensor>.npy
"""
import json
import os
import shutil
from collections import Counter

import numpy as np
import onnx
import torch

OPSET = 13

# ONNX TensorProto element types that appear in the reference graphs.
_ELEM_NAMES = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 11: "float64"}


def save_npy(path, array):
    """Writes a C-ordered, little-endian .npy (format 1.0); 0-d stays 0-d.
    float64 is narrowed to float32: every reference tensor is float32 or
    int64."""
    a = np.asarray(array)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    # np.array keeps a 0-d scalar 0-d (np.ascontiguousarray would make it [1]).
    a = np.array(a, dtype=a.dtype.newbyteorder("<"), order="C")
    with open(path, "wb") as f:
        np.save(f, a, allow_pickle=False)
    return a


def tensor_entry(outdir, rel, array):
    """Saves `array` at OUTDIR/rel and returns its json description."""
    a = save_npy(os.path.join(outdir, rel), array)
    entry = {"file": rel, "dtype": str(a.dtype), "shape": list(a.shape)}
    if a.size and a.dtype == np.float32:
        entry["absmax"] = float(np.abs(a).max())
    return entry


def _value_info(vi):
    t = vi.type.tensor_type
    dims = []
    for d in t.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append("?")
    return {"name": vi.name, "dtype": _ELEM_NAMES.get(t.elem_type, "onnx_type_%d" % t.elem_type),
            "shape": dims}


def _op_counts(model):
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


def _as_tuple(outs):
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def clear_model(outdir, name):
    """Removes whatever an earlier run left for `name`."""
    for rel in (name + ".onnx", name + ".json"):
        if os.path.exists(os.path.join(outdir, rel)):
            os.remove(os.path.join(outdir, rel))
    for rel in (name + ".ref", name):
        if os.path.isdir(os.path.join(outdir, rel)):
            shutil.rmtree(os.path.join(outdir, rel))


def export_onnx_model(outdir, spec, generator):
    """Exports spec.net, runs the ONNX checker, evaluates every case with
    PyTorch and writes the json. Returns the relative paths written.

    spec: a catalog.OnnxModel. generator: a string naming the script and its
    digest, recorded in the json."""
    name = spec.name
    clear_model(outdir, name)
    onnx_rel = name + ".onnx"
    with torch.no_grad():
        torch.onnx.export(spec.net, spec.example, os.path.join(outdir, onnx_rel),
                          opset_version=OPSET, input_names=list(spec.inputs),
                          output_names=list(spec.outputs), dynamic_axes=spec.dynamic_axes,
                          do_constant_folding=True)
    model = onnx.load(os.path.join(outdir, onnx_rel))
    # A model the checker rejects is no reference: let the exception stop the run.
    onnx.checker.check_model(model, full_check=True)
    main_ops, nested_ops = _op_counts(model)
    meta = {
        "name": name,
        "file": onnx_rel,
        "opset": OPSET,
        "description": spec.description,
        "producer": "torch %s / onnx %s" % (torch.__version__, onnx.__version__),
        "generator": generator,
        "reference": spec.reference,
        "checker": "onnx.checker.check_model(full_check=True) passed",
        "inputs": [_value_info(v) for v in model.graph.input],
        "outputs": [_value_info(v) for v in model.graph.output],
        "op_types": main_ops,
        "subgraph_op_types": nested_ops,
        "tolerance": {"rtol": spec.rtol, "atol": spec.atol},
        "cases": [],
    }
    written = [onnx_rel]
    for cid, args in enumerate(spec.cases):
        with torch.no_grad():
            outs = _as_tuple(spec.net(*args))
        if len(outs) != len(spec.outputs):
            raise RuntimeError("%s case %d: %d outputs, expected %d" % (name, cid, len(outs), len(spec.outputs)))
        case_dir = "%s.ref/%d" % (name, cid)
        os.makedirs(os.path.join(outdir, case_dir), exist_ok=True)
        case = {"id": cid, "inputs": {}, "outputs": {}}
        for kind, names, values in (("inputs", spec.inputs, args), ("outputs", spec.outputs, outs)):
            for tname, value in zip(names, values):
                rel = "%s/%s.npy" % (case_dir, tname)
                case[kind][tname] = tensor_entry(outdir, rel, value.detach().numpy())
                written.append(rel)
        if spec.note:
            case["note"] = spec.note(args, outs)
        meta["cases"].append(case)
    with open(os.path.join(outdir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=False)
        f.write("\n")
    written.append(name + ".json")
    return written


def export_treelstm(outdir, net, trees, description, generator, rtol, atol):
    """Writes treelstm/<param>.npy, the trees and root_h/root_c [trees, hidden]
    computed by the eager recursion, and treelstm.json."""
    from .treelstm import count_leaves

    clear_model(outdir, "treelstm")
    os.makedirs(os.path.join(outdir, "treelstm"))
    written = []
    params = {}
    for pname, p in net.state_dict().items():
        rel = "treelstm/%s.npy" % pname
        params[pname] = tensor_entry(outdir, rel, p.detach().numpy())
        written.append(rel)
    with torch.no_grad():
        roots = [net(t) for t in trees]
    meta = {
        "name": "treelstm",
        "description": description,
        "producer": "torch %s" % torch.__version__,
        "generator": generator,
        "reference": "PyTorch eager recursion over each tree",
        "tolerance": {"rtol": rtol, "atol": atol},
        "params": params,
        "trees": trees,
        "leaves": [count_leaves(t) for t in trees],
    }
    for key, idx in (("root_h", 0), ("root_c", 1)):
        rel = "treelstm/%s.npy" % key
        meta[key] = tensor_entry(outdir, rel, torch.cat([r[idx] for r in roots]).numpy())
        written.append(rel)
    with open(os.path.join(outdir, "treelstm.json"), "w") as f:
        json.dump(meta, f)  # compact: the trees are deeply nested lists
        f.write("\n")
    written.append("treelstm.json")
    return written
