"""Writing one reference model: the ONNX export, its description (NAME.json)
and the input/output tensors of every case as .npy files.

Layout under OUTDIR (all paths in the json are relative to OUTDIR):
  NAME.onnx
  NAME.json
  NAME.ref/<case>/<tensor>.npy
"""
import json
import os

import onnx
import torch

from .files import as_tuple, clear_model, op_counts, tensor_entry, value_info

OPSET = 13


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
    main_ops, nested_ops = op_counts(model)
    meta = {
        "name": name,
        "file": onnx_rel,
        "opset": OPSET,
        "description": spec.description,
        "producer": "torch %s / onnx %s" % (torch.__version__, onnx.__version__),
        "generator": generator,
        "reference": spec.reference,
        "checker": "onnx.checker.check_model(full_check=True) passed",
        "inputs": [value_info(v) for v in model.graph.input],
        "outputs": [value_info(v) for v in model.graph.output],
        "op_types": main_ops,
        "subgraph_op_types": nested_ops,
        "tolerance": {"rtol": spec.rtol, "atol": spec.atol},
        "cases": [],
    }
    written = [onnx_rel]
    for cid, args in enumerate(spec.cases):
        with torch.no_grad():
            outs = as_tuple(spec.net(*args))
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
