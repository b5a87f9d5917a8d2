#!/usr/bin/python3
"""test_reference_models_are_consistent: checks the generated reference
models against their own descriptions and recomputes their outputs without
PyTorch.

    /usr/bin/python3 tests/models/check_reference_models.py MODELS_DIR

For every model of the set:
  - NAME.json is well formed: opset 13, inputs/outputs, tolerance, cases
    numbered 0..n-1, each case listing every graph input and output;
  - every .npy is a plain little-endian C-order NumPy 1.0 file whose header
    (parsed here, not by numpy) gives the dtype and shape the json states,
    and whose size is exactly header + data;
  - the shapes of a case fit the declared ones: constants equal, one
    symbolic dim has one value across the case's inputs and outputs;
  - NAME.onnx passes onnx.checker (full_check), its graph inputs, outputs and
    op counts are the ones in the json, and ONNX shape inference, given the
    case's input shapes, agrees with the stored output shapes where it can
    tell;
  - every case's outputs are recomputed from the ONNX graph by a NumPy ONNX
    interpreter (onnx_numpy.py) and must match within the json's tolerance
    (integer outputs exactly);
  - treelstm's root h and c are recomputed by a NumPy recursion over the
    stored trees and weights;
  - the cases cover what they are meant to: sequence lengths 1 and 128,
    batches 1 and 64, zero-trip loops and both If branches, 0 and 100 while
    iterations, an empty NonZero.
Prints one line per model; exits 1 naming every problem found.
"""
import ast
import json
import os
import sys
import time

import numpy as np
import onnx

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_numpy  # noqa: E402

EXPECTED = ("mlp", "cnn", "squeezenet1_0", "mobilenet_v2", "lstm", "lstm2", "gru", "bert_tiny", "bert_tiny_emb",
            "loop_if", "while_loop", "dyn_ops", "treelstm")
NPY_DESCR = {"<f4": "float32", "<i8": "int64", "|b1": "bool", "<i4": "int32"}


class Problems:
    def __init__(self):
        self.items = []

    def add(self, where, what):
        self.items.append("%s: %s" % (where, what))


def read_npy(path):
    """Parses a .npy file by the format's specification (magic, version 1.0,
    header dict, data). Returns (descr, shape, data bytes); raises ValueError
    naming what is wrong."""
    with open(path, "rb") as f:
        blob = f.read()
    if blob[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file (bad magic)")
    if blob[6:8] != b"\x01\x00":
        raise ValueError("npy version %d.%d, expected 1.0" % (blob[6], blob[7]))
    hlen = int.from_bytes(blob[8:10], "little")
    if (10 + hlen) % 16:
        raise ValueError("header length %d does not align the data to 16 bytes" % hlen)
    header = ast.literal_eval(blob[10:10 + hlen].decode("latin1"))
    if header.get("fortran_order") is not False:
        raise ValueError("not C order")
    descr = header.get("descr")
    if descr not in NPY_DESCR:
        raise ValueError("dtype %r is not one of %s" % (descr, sorted(NPY_DESCR)))
    shape = tuple(header["shape"])
    count = int(np.prod(shape, dtype=np.int64))
    data = blob[10 + hlen:]
    need = count * np.dtype(descr).itemsize
    if len(data) != need:
        raise ValueError("%d data bytes, shape %s of %s needs %d" % (len(data), list(shape), descr, need))
    return NPY_DESCR[descr], shape, data


def load_tensor(root, entry, where, problems):
    """Reads the tensor a json entry names and checks it against the entry."""
    path = os.path.join(root, entry.get("file", ""))
    try:
        dtype, shape, data = read_npy(path)
    except (OSError, ValueError, SyntaxError) as e:
        problems.add(where, "%s: %s" % (entry.get("file"), e))
        return None
    if dtype != entry.get("dtype") or list(shape) != entry.get("shape"):
        problems.add(where, "%s holds %s %s, json says %s %s"
                     % (entry["file"], dtype, list(shape), entry.get("dtype"), entry.get("shape")))
        return None
    return np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)


def compare(where, got, want, rtol, atol, problems):
    """Returns the worst |got - want| / (atol + rtol |want|) (<= 1 passes)."""
    if got.shape != want.shape:
        problems.add(where, "recomputed shape %s, stored %s" % (list(got.shape), list(want.shape)))
        return float("inf")
    if want.dtype.kind in "iub":
        if not np.array_equal(got.astype(want.dtype), want):
            bad = np.argwhere(got.astype(want.dtype) != want)[0]
            problems.add(where, "recomputed %s at %s, stored %s" % (got[tuple(bad)], list(bad), want[tuple(bad)]))
            return float("inf")
        return 0.0
    if want.size == 0:
        return 0.0
    ratio = np.abs(got.astype(np.float64) - want) / (atol + rtol * np.abs(want.astype(np.float64)))
    worst = float(np.nanmax(ratio)) if not np.isnan(ratio).all() else float("inf")
    if not np.isfinite(got).all() or worst > 1.0:
        bad = np.unravel_index(np.nanargmax(ratio), ratio.shape)
        problems.add(where, "recomputed %r at %s, stored %r (rtol %g, atol %g)"
                     % (float(got[bad]), list(bad), float(want[bad]), rtol, atol))
    return worst


def check_dims(where, declared, cases_shapes, problems):
    """declared: {tensor: [int | symbol]}; cases_shapes: {tensor: shape}."""
    binding = {}
    for tname, dims in declared.items():
        shape = cases_shapes.get(tname)
        if shape is None:
            continue
        if len(dims) != len(shape):
            problems.add(where, "%s has rank %d, declared %s" % (tname, len(shape), dims))
            continue
        for d, v in zip(dims, shape):
            if isinstance(d, int):
                if d != v:
                    problems.add(where, "%s has shape %s, declared %s" % (tname, list(shape), dims))
            elif binding.setdefault(d, v) != v:
                problems.add(where, "dim '%s' is %d in %s but %d elsewhere" % (d, v, tname, binding[d]))


def op_counts(model):
    main, nested = {}, {}
    for n in model.graph.node:
        main[n.op_type] = main.get(n.op_type, 0) + 1
    todo = [model.graph]
    while todo:
        for n in todo.pop().node:
            for a in n.attribute:
                for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else []) + list(a.graphs):
                    for m in g.node:
                        nested[m.op_type] = nested.get(m.op_type, 0) + 1
                    todo.append(g)
    return main, nested


def inferred_output_shapes(model, input_shapes):
    """ONNX shape inference with the graph inputs fixed to concrete shapes;
    returns {output: [int | None]} (None where inference could not tell)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in m.graph.input:
        if vi.name in input_shapes:
            dims = vi.type.tensor_type.shape.dim
            for d, v in zip(dims, input_shapes[vi.name]):
                d.Clear()
                d.dim_value = v
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    out = {}
    for vi in m.graph.output:
        out[vi.name] = [d.dim_value if d.HasField("dim_value") else None
                        for d in vi.type.tensor_type.shape.dim]
    return out


def check_onnx_model(root, name, problems):
    where = name + ".json"
    try:
        with open(os.path.join(root, name + ".json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        problems.add(where, str(e))
        return None
    for key in ("file", "opset", "inputs", "outputs", "op_types", "subgraph_op_types", "tolerance", "cases"):
        if key not in meta:
            problems.add(where, "missing key '%s'" % key)
            return None
    if meta["opset"] != 13 or meta["name"] != name:
        problems.add(where, "name %r opset %r, expected %r opset 13" % (meta["name"], meta["opset"], name))
    rtol, atol = float(meta["tolerance"]["rtol"]), float(meta["tolerance"]["atol"])
    if not (0 < rtol <= 1e-2 and 0 < atol <= 1e-3):
        problems.add(where, "tolerance rtol %g atol %g is not a meaningful one" % (rtol, atol))

    try:
        model = onnx.load(os.path.join(root, meta["file"]))
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # any failure to load or check is a finding
        problems.add(meta["file"], "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
        return None
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if opset != [13]:
        problems.add(meta["file"], "opset imports %s, expected [13]" % opset)
    graph_io = {}
    for kind, vis in (("inputs", model.graph.input), ("outputs", model.graph.output)):
        names = [vi.name for vi in vis]
        if names != [d["name"] for d in meta[kind]]:
            problems.add(where, "%s %s, the graph has %s" % (kind, [d["name"] for d in meta[kind]], names))
        for vi in vis:
            tt = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in tt.shape.dim]
            graph_io[vi.name] = (np.dtype(onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[tt.elem_type]).name, dims)
    for d in meta["inputs"] + meta["outputs"]:
        if d["name"] in graph_io and graph_io[d["name"]] != (d["dtype"], d["shape"]):
            problems.add(where, "'%s' is %s %s, the graph says %s %s"
                         % (d["name"], d["dtype"], d["shape"], *graph_io[d["name"]]))
    main_ops, nested_ops = op_counts(model)
    if main_ops != meta["op_types"] or nested_ops != meta["subgraph_op_types"]:
        problems.add(where, "op counts differ from the graph's: %s / %s" % (main_ops, nested_ops))

    declared = {d["name"]: d["shape"] for d in meta["inputs"] + meta["outputs"]}
    dtypes = {d["name"]: d["dtype"] for d in meta["inputs"] + meta["outputs"]}
    ids = [c.get("id") for c in meta["cases"]]
    if not ids or ids != list(range(len(ids))):
        problems.add(where, "case ids %s, expected 0..n-1" % ids)
    worst = 0.0
    cases = []
    for case in meta["cases"]:
        cw = "%s case %s" % (name, case.get("id"))
        tensors = {}
        for kind in ("inputs", "outputs"):
            listed = case.get(kind, {})
            for d in meta[kind]:
                if d["name"] not in listed:
                    problems.add(cw, "%s '%s' is not listed" % (kind[:-1], d["name"]))
                    continue
                entry = listed[d["name"]]
                if entry.get("dtype") != dtypes[d["name"]]:
                    problems.add(cw, "'%s' is %s, declared %s" % (d["name"], entry.get("dtype"), dtypes[d["name"]]))
                want_file = "%s.ref/%s/%s.npy" % (name, case.get("id"), d["name"])
                if entry.get("file") != want_file:
                    problems.add(cw, "'%s' is stored at %s, expected %s" % (d["name"], entry.get("file"), want_file))
                t = load_tensor(root, entry, cw, problems)
                if t is not None:
                    tensors[d["name"]] = t
        if len(tensors) != len(declared):
            continue
        check_dims(cw, declared, {k: v.shape for k, v in tensors.items()}, problems)
        ins = {d["name"]: tensors[d["name"]] for d in meta["inputs"]}
        try:
            inferred = inferred_output_shapes(model, {k: v.shape for k, v in ins.items()})
        except Exception as e:
            problems.add(cw, "shape inference failed: %s" % str(e).splitlines()[0])
            inferred = {}
        for oname, dims in inferred.items():
            stored = tensors[oname].shape
            if len(dims) not in (0, len(stored)) or any(
                    d is not None and d != v for d, v in zip(dims, stored)):
                if dims:
                    problems.add(cw, "shape inference gives %s for '%s', stored %s" % (dims, oname, list(stored)))
        try:
            del onnx_numpy.IF_TRACE[:]
            got = onnx_numpy.run_model(model, {k: np.array(v) for k, v in ins.items()})
            case["_if_taken"] = sorted({taken for _, taken in onnx_numpy.IF_TRACE})
        except onnx_numpy.OnnxEvalError as e:
            problems.add(cw, "NumPy evaluation: %s" % e)
            continue
        for d, g in zip(meta["outputs"], got):
            worst = max(worst, compare("%s output '%s'" % (cw, d["name"]), g, tensors[d["name"]], rtol, atol, problems))
        cases.append((case, tensors))
    return meta, cases, worst


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def check_treelstm(root, problems):
    where = "treelstm.json"
    try:
        with open(os.path.join(root, "treelstm.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        problems.add(where, str(e))
        return 0.0
    want = {"emb.weight": [1000, 128], "leaf.weight": [384, 128], "leaf.bias": [384],
            "node.weight": [640, 256], "node.bias": [640]}
    p = {}
    for pname, shape in want.items():
        entry = meta.get("params", {}).get(pname)
        if entry is None or entry.get("shape") != shape:
            problems.add(where, "parameter %s: %s, expected shape %s" % (pname, entry, shape))
            return 0.0
        t = load_tensor(root, entry, where, problems)
        if t is None:
            return 0.0
        p[pname] = t.astype(np.float64)
    trees = meta.get("trees", [])
    if len(trees) != 20:
        problems.add(where, "%d trees, expected 20" % len(trees))

    def leaves(t):
        return 1 if isinstance(t, int) else leaves(t[0]) + leaves(t[1])

    def run(t):
        if isinstance(t, int):
            if not 0 <= t < 1000:
                raise ValueError("word id %d outside the vocabulary" % t)
            i, o, u = np.split(p["leaf.weight"] @ p["emb.weight"][t] + p["leaf.bias"], 3)
            c = _sig(i) * np.tanh(u)
            return _sig(o) * np.tanh(c), c
        (hl, cl), (hr, cr) = run(t[0]), run(t[1])
        i, fl, fr, o, u = np.split(p["node.weight"] @ np.concatenate([hl, hr]) + p["node.bias"], 5)
        c = _sig(i) * np.tanh(u) + _sig(fl) * cl + _sig(fr) * cr
        return _sig(o) * np.tanh(c), c

    if meta.get("leaves") != [leaves(t) for t in trees]:
        problems.add(where, "leaf counts %s do not match the trees" % meta.get("leaves"))
    if not all(20 <= leaves(t) <= 40 for t in trees):
        problems.add(where, "a tree has fewer than 20 or more than 40 leaves")
    try:
        roots = [run(t) for t in trees]
    except (ValueError, TypeError, IndexError) as e:
        problems.add(where, "bad tree: %s" % e)
        return 0.0
    tol = meta.get("tolerance", {"rtol": 1e-4, "atol": 1e-5})
    worst = 0.0
    for key, idx in (("root_h", 0), ("root_c", 1)):
        entry = meta.get(key)
        if entry is None or entry.get("shape") != [len(trees), 128]:
            problems.add(where, "%s: %s, expected shape [%d, 128]" % (key, entry, len(trees)))
            continue
        stored = load_tensor(root, entry, where, problems)
        if stored is not None:
            got = np.stack([r[idx] for r in roots])
            worst = max(worst, compare("treelstm %s" % key, got, stored, tol["rtol"], tol["atol"], problems))
    return worst


def check_coverage(results, problems):
    """The dynamic behaviours each model is there to exercise."""
    def dims(name, tensor, axis):
        return {c[1][tensor].shape[axis] for c in results[name][1]}

    for name, tensor, axis, need in (("lstm", "x", 0, {1, 128}), ("lstm2", "x", 0, {1, 128}), ("gru", "x", 0, {1, 128}),
                                     ("bert_tiny", "x", 1, {1, 128}), ("bert_tiny_emb", "ids", 1, {1, 128}),
                                     ("mlp", "x", 0, {1, 64}), ("cnn", "x", 0, {1, 4}),
                                     ("squeezenet1_0", "x", 0, {1, 2}), ("mobilenet_v2", "x", 0, {1, 2}),
                                     ("dyn_ops", "nz", 0, {0})):
        if name in results and not need <= dims(name, tensor, axis):
            problems.add(name, "cases have %s = %s, need %s among them"
                         % (tensor, sorted(dims(name, tensor, axis)), sorted(need)))
    if "loop_if" in results:
        # Branches as the NumPy evaluation took them, not as the notes say.
        trips = sorted({int(c[1]["n"]) for c in results["loop_if"][1]})
        taken = sorted({b for c in results["loop_if"][1] for b in c[0].get("_if_taken", [])})
        if not {0, 3, 7} <= set(trips) or taken != ["else", "then"]:
            problems.add("loop_if", "cases need trip counts 0, 3, 7 and both If branches (trips %s, branches %s)"
                         % (trips, taken))
    if "while_loop" in results:
        iters = {int(c[1]["iters"][0]) for c in results["while_loop"][1]}
        if not {0, 100} <= iters:
            problems.add("while_loop", "iterations %s, need 0 and 100" % sorted(iters))


def check_set(root, names, problems):
    """Checks the models `names` under `root`, adding to `problems`."""
    results = {}
    for name in names:
        t0 = time.monotonic()
        try:
            if name == "treelstm":
                worst = check_treelstm(root, problems)
                n = 20
            else:
                r = check_onnx_model(root, name, problems)
                if r is None:
                    continue
                results[name] = r
                worst, n = r[2], len(r[1])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # A json of the wrong shape: report it against the model, go on.
            problems.add(name, "malformed description: %s: %s" % (type(e).__name__, e))
            continue
        print("%-14s %2d case(s) recomputed, worst error %.3f of tolerance  %5.1f s"
              % (name, n, worst, time.monotonic() - t0), flush=True)
    check_coverage(results, problems)


def main(argv):
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--only"):
        print("usage: check_reference_models.py MODELS_DIR [--only NAME,...]", file=sys.stderr)
        return 2
    root = argv[0]
    names = argv[2].split(",") if len(argv) == 3 else EXPECTED
    unknown = [n for n in names if n not in EXPECTED]
    if unknown:
        print("check_reference_models: unknown model(s) %s" % ", ".join(unknown), file=sys.stderr)
        return 2
    problems = Problems()
    check_set(root, names, problems)
    for p in problems.items:
        print("PROBLEM " + p)
    print("%d problem(s)" % len(problems.items))
    return 1 if problems.items else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
