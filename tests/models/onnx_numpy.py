"""A small ONNX interpreter written with NumPy, covering the operators of
Nimble's reference models (opset 13).

It exists to check the reference files independently of PyTorch: the
expected outputs were computed by PyTorch on the module that was exported,
and this interpreter recomputes them from the exported ONNX graph alone,
following the ONNX operator specification. Agreement shows that the .onnx
file, its weights and the stored outputs belong together. (onnx 1.12 has no
reference evaluator of its own.)

    outputs = run_model(onnx.load(path), {"x": array, ...})   # list, graph order

Unsupported operators raise OnnxEvalError naming the node.
"""
import math

import numpy as np
import onnx
from onnx import helper, mapping, numpy_helper


class OnnxEvalError(Exception):
    pass


MAX_LOOP_TRIPS = 100000  # a Loop that runs longer than this is a bug, not a model

# Every If evaluated appends (node name, "then" | "else") here, so a caller
# can tell which branches its inputs exercised. Callers clear it.
IF_TRACE = []


def _np_dtype(elem_type):
    return np.dtype(mapping.TENSOR_TYPE_TO_NP_TYPE[elem_type])


def _attrs(node):
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, bytes):
            v = v.decode()
        out[a.name] = v
    return out


def _axis(axis, rank):
    return axis + rank if axis < 0 else axis


# --- element-wise ------------------------------------------------------------

def _unary(fn):
    return lambda ins, at, scope: [fn(ins[0])]


def _binary(fn):
    return lambda ins, at, scope: [fn(ins[0], ins[1])]


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        # ONNX integer Div truncates toward zero (C semantics).
        q = np.abs(a) // np.abs(b)
        return (q * np.sign(a) * np.sign(b)).astype(a.dtype)
    return a / b


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


def _clip(ins, at, scope):
    x = ins[0]
    lo = ins[1] if len(ins) > 1 and ins[1] is not None else None
    hi = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if lo is not None:
        x = np.maximum(x, lo.astype(x.dtype))
    if hi is not None:
        x = np.minimum(x, hi.astype(x.dtype))
    return [x]


def _cast(ins, at, scope):
    return [ins[0].astype(_np_dtype(at["to"]))]


# --- linear algebra and neural-network ops -------------------------------------

def _gemm(ins, at, scope):
    a, b = ins[0], ins[1]
    if at.get("transA", 0):
        a = a.T
    if at.get("transB", 0):
        b = b.T
    y = at.get("alpha", 1.0) * (a @ b)
    if len(ins) > 2 and ins[2] is not None:
        y = y + at.get("beta", 1.0) * ins[2]
    return [y.astype(ins[0].dtype)]


def _windows(x, kernel, strides, dilations):
    """View of x [N, C, H, W] as [N, C, kh, kw, OH, OW] (no copy)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    oh = (h - (kh - 1) * dilations[0] - 1) // strides[0] + 1
    ow = (w - (kw - 1) * dilations[1] - 1) // strides[1] + 1
    sn, sc, sh, sw = x.strides
    return np.lib.stride_tricks.as_strided(
        x, (n, c, kh, kw, oh, ow),
        (sn, sc, sh * dilations[0], sw * dilations[1], sh * strides[0], sw * strides[1]), writeable=False)


def _conv(ins, at, scope):
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if x.ndim != 4 or at.get("auto_pad", "NOTSET") != "NOTSET":
        raise OnnxEvalError("Conv: only 2-D convolution with explicit pads is supported")
    m, cg, kh, kw = w.shape
    group = at.get("group", 1)
    pads = at.get("pads", [0, 0, 0, 0])
    strides = at.get("strides", [1, 1])
    dil = at.get("dilations", [1, 1])
    if x.shape[1] != cg * group or m % group:
        raise OnnxEvalError("Conv: input channels %d do not match weight %s with group %d"
                            % (x.shape[1], list(w.shape), group))
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    win = _windows(xp, (kh, kw), strides, dil)
    n, _, _, _, oh, ow = win.shape
    if cg == 1 and m == group:  # depthwise: one filter per channel
        y = np.zeros((n, m, oh, ow), dtype=x.dtype)
        for i in range(kh):
            for j in range(kw):
                y += win[:, :, i, j] * w[:, 0, i, j][None, :, None, None]
    else:
        mg = m // group
        parts = []
        for g in range(group):
            cols = win[:, g * cg:(g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
            parts.append(np.matmul(w[g * mg:(g + 1) * mg].reshape(mg, -1), cols))
        y = np.concatenate(parts, axis=1).reshape(n, m, oh, ow)
    if bias is not None:
        y = y + bias[None, :, None, None]
    return [y.astype(x.dtype)]


def _maxpool(ins, at, scope):
    x = ins[0]
    if x.ndim != 4 or at.get("auto_pad", "NOTSET") != "NOTSET" or at.get("storage_order", 0):
        raise OnnxEvalError("MaxPool: only 2-D pooling with explicit pads is supported")
    k = at["kernel_shape"]
    strides = at.get("strides", [1, 1])
    dil = at.get("dilations", [1, 1])
    pads = list(at.get("pads", [0, 0, 0, 0]))
    for d in range(2):
        size = x.shape[2 + d] + pads[d] + pads[d + 2]
        span = (k[d] - 1) * dil[d] + 1
        if at.get("ceil_mode", 0):
            out = -(-(size - span) // strides[d]) + 1
            # A window must start inside the input or its leading pad.
            if (out - 1) * strides[d] >= x.shape[2 + d] + pads[d]:
                out -= 1
        else:
            out = (size - span) // strides[d] + 1
        pads[d + 2] += max(0, (out - 1) * strides[d] + span - size)
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=-np.inf)
    return [_windows(xp, k, strides, dil).max(axis=(2, 3))]


def _global_avg_pool(ins, at, scope):
    x = ins[0]
    return [x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float64).astype(x.dtype)]


def _softmax(ins, at, scope):
    x = ins[0]
    axis = at.get("axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return [e / e.sum(axis=axis, keepdims=True)]


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _lstm(ins, at, scope):
    """ONNX LSTM, forward direction, default activations (sigmoid, tanh,
    tanh), gate order i, o, f, c, no peepholes, layout 0."""
    x, w, r = ins[0], ins[1], ins[2]
    b = ins[3] if len(ins) > 3 and ins[3] is not None else None
    if len(ins) > 4 and ins[4] is not None:
        raise OnnxEvalError("LSTM: sequence_lens is not supported")
    if at.get("direction", "forward") != "forward" or at.get("layout", 0) or at.get("input_forget", 0) \
            or "activations" in at or "clip" in at or (len(ins) > 7 and ins[7] is not None):
        raise OnnxEvalError("LSTM: only forward, layout 0, default activations, no clip/peepholes")
    hid = at["hidden_size"]
    seq, batch, _ = x.shape
    h = ins[5][0] if len(ins) > 5 and ins[5] is not None else np.zeros((batch, hid), x.dtype)
    c = ins[6][0] if len(ins) > 6 and ins[6] is not None else np.zeros((batch, hid), x.dtype)
    bias = (b[0, :4 * hid] + b[0, 4 * hid:]) if b is not None else np.zeros(4 * hid, x.dtype)
    xw = x @ w[0].T + bias  # [seq, batch, 4H], all steps at once
    ys = np.zeros((seq, 1, batch, hid), x.dtype)
    for t in range(seq):
        g = xw[t] + h @ r[0].T
        i, o, f, cc = (g[:, k * hid:(k + 1) * hid] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(cc)
        h = _sigmoid(o) * np.tanh(c)
        ys[t, 0] = h
    return [ys, h[None], c[None]]


def _gru(ins, at, scope):
    """ONNX GRU, forward direction, default activations (sigmoid, tanh),
    gate order z, r, h, layout 0, either linear_before_reset."""
    x, w, r = ins[0], ins[1], ins[2]
    b = ins[3] if len(ins) > 3 and ins[3] is not None else None
    if len(ins) > 4 and ins[4] is not None:
        raise OnnxEvalError("GRU: sequence_lens is not supported")
    if at.get("direction", "forward") != "forward" or at.get("layout", 0) or "activations" in at or "clip" in at:
        raise OnnxEvalError("GRU: only forward, layout 0, default activations, no clip")
    hid, lbr = at["hidden_size"], at.get("linear_before_reset", 0)
    seq, batch, _ = x.shape
    h = ins[5][0] if len(ins) > 5 and ins[5] is not None else np.zeros((batch, hid), x.dtype)
    wb, rb = (b[0, :3 * hid], b[0, 3 * hid:]) if b is not None else (np.zeros(3 * hid, x.dtype),) * 2
    xw = x @ w[0].T + wb  # [seq, batch, 3H], all steps at once
    rz, rr, rh = (r[0][k * hid:(k + 1) * hid] for k in range(3))
    ys = np.zeros((seq, 1, batch, hid), x.dtype)
    for t in range(seq):
        xz, xr, xh = (xw[t][:, k * hid:(k + 1) * hid] for k in range(3))
        z = _sigmoid(xz + h @ rz.T + rb[:hid])
        rg = _sigmoid(xr + h @ rr.T + rb[hid:2 * hid])
        if lbr:
            hh = np.tanh(xh + rg * (h @ rh.T + rb[2 * hid:]))
        else:
            hh = np.tanh(xh + (rg * h) @ rh.T + rb[2 * hid:])
        h = (1 - z) * hh + z * h
        ys[t, 0] = h
    return [ys, h[None]]


# --- shapes and indexing ------------------------------------------------------

def _reshape(ins, at, scope):
    x, shape = ins[0], [int(v) for v in ins[1]]
    if not at.get("allowzero", 0):
        shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return [x.reshape(shape)]


def _flatten(ins, at, scope):
    x = ins[0]
    axis = _axis(at.get("axis", 1), x.ndim)
    return [x.reshape(int(np.prod(x.shape[:axis])), -1)]


def _unsqueeze(ins, at, scope):
    x = ins[0]
    rank = x.ndim + len(ins[1])
    for a in sorted(_axis(int(v), rank) for v in ins[1]):
        x = np.expand_dims(x, a)
    return [x]


def _squeeze(ins, at, scope):
    x = ins[0]
    if len(ins) > 1 and ins[1] is not None:
        return [np.squeeze(x, axis=tuple(_axis(int(v), x.ndim) for v in ins[1]))]
    return [np.squeeze(x)]


def _slice(ins, at, scope):
    x = ins[0]
    starts, ends = ins[1], ins[2]
    axes = ins[3] if len(ins) > 3 and ins[3] is not None else range(len(starts))
    steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        a, dim, s, e, st = _axis(int(a), x.ndim), x.shape[_axis(int(a), x.ndim)], int(s), int(e), int(st)
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:  # clamp to [-1, dim-1]; -1 as an end means "past the front"
            s, e = min(max(s, -1), dim - 1), min(max(e, -1), dim - 1)
            e = None if e < 0 else e
        index[a] = slice(s, e, st)
    return [x[tuple(index)]]


def _gather(ins, at, scope):
    x, idx = ins[0], ins[1]
    axis = _axis(at.get("axis", 0), x.ndim)
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return [np.take(x, idx, axis=axis)]


def _gather_nd(ins, at, scope):
    x, idx = ins[0], ins[1]
    if at.get("batch_dims", 0):
        raise OnnxEvalError("GatherND: batch_dims is not supported")
    return [x[tuple(np.moveaxis(idx, -1, 0))]]


def _topk(ins, at, scope):
    x, k = ins[0], int(ins[1].reshape(-1)[0])
    axis = _axis(at.get("axis", -1), x.ndim)
    if k < 0 or k > x.shape[axis]:
        raise OnnxEvalError("TopK: k=%d outside [0, %d]" % (k, x.shape[axis]))
    keys = -x if at.get("largest", 1) else x
    # A stable sort puts equal values in index order, as ONNX requires.
    order = np.take(np.argsort(keys, axis=axis, kind="stable"), np.arange(k), axis=axis)
    return [np.take_along_axis(x, order, axis=axis), order.astype(np.int64)]


def _reduce(fn):
    def op(ins, at, scope):
        x = ins[0]
        axes = at.get("axes")
        if axes is None and len(ins) > 1 and ins[1] is not None:
            axes = [int(v) for v in ins[1]]
        if not axes:
            if at.get("noop_with_empty_axes", 0):
                return [x]
            axes = range(x.ndim)
        return [np.asarray(fn(x, axis=tuple(_axis(a, x.ndim) for a in axes),
                              keepdims=bool(at.get("keepdims", 1)))).astype(x.dtype)]
    return op


def _constant(ins, at, scope):
    if "value" in at:
        return [at["value"]]
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32),
                    ("value_int", np.int64), ("value_ints", np.int64)):
        if key in at:
            return [np.array(at[key], dtype=dt)]
    raise OnnxEvalError("Constant: no supported value attribute")


def _constant_of_shape(ins, at, scope):
    value = at.get("value", np.zeros(1, np.float32))
    return [np.full([int(v) for v in ins[0]], value.reshape(-1)[0], dtype=value.dtype)]


def _expand(ins, at, scope):
    x, shape = ins[0], tuple(int(v) for v in ins[1])
    return [np.broadcast_to(x, np.broadcast_shapes(x.shape, shape)).copy()]


def _range(ins, at, scope):
    start, limit, delta = (v.reshape(()) for v in ins)
    return [np.arange(start, limit, delta).astype(start.dtype)]


# --- control flow -------------------------------------------------------------

def _if(ins, at, scope):
    taken = "then" if bool(ins[0].reshape(())) else "else"
    IF_TRACE.append((at["__node__"], taken))
    return run_graph(at[taken + "_branch"], {}, scope)


def _loop(ins, at, scope):
    body = at["body"]
    trips = int(ins[0].reshape(())) if ins and ins[0] is not None else None
    cond = bool(ins[1].reshape(())) if len(ins) > 1 and ins[1] is not None else True
    carried = list(ins[2:])
    n_scan = len(body.output) - 1 - len(carried)
    scans = [[] for _ in range(n_scan)]
    i = 0
    while cond and (trips is None or i < trips):
        if i >= MAX_LOOP_TRIPS:
            raise OnnxEvalError("Loop: more than %d iterations" % MAX_LOOP_TRIPS)
        feeds = {body.input[0].name: np.array(i, np.int64), body.input[1].name: np.array(cond)}
        feeds.update({vi.name: v for vi, v in zip(body.input[2:], carried)})
        outs = run_graph(body, feeds, scope)
        cond = bool(outs[0].reshape(()))
        carried = outs[1:1 + len(carried)]
        for s, v in zip(scans, outs[1 + len(carried):]):
            s.append(v)
        i += 1
    return carried + [np.stack(s) if s else np.zeros((0,), np.float32) for s in scans]


OPS = {
    "Abs": _unary(np.abs), "Add": _binary(np.add), "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply), "Div": _binary(_div),
    "Pow": _binary(lambda a, b: np.power(a, b).astype(a.dtype)),
    "Sqrt": _unary(np.sqrt), "Erf": _unary(_erf), "Tanh": _unary(np.tanh), "Neg": _unary(np.negative),
    "Sigmoid": _unary(_sigmoid), "Relu": _unary(lambda x: np.maximum(x, 0).astype(x.dtype)),
    "Greater": _binary(np.greater), "Less": _binary(np.less), "Equal": _binary(np.equal),
    "Not": _unary(np.logical_not), "And": _binary(np.logical_and),
    "Where": lambda ins, at, scope: [np.where(ins[0], ins[1], ins[2])],
    "Identity": _unary(lambda x: x), "Clip": _clip, "Cast": _cast,
    "MatMul": _binary(np.matmul), "Gemm": _gemm, "Conv": _conv, "MaxPool": _maxpool,
    "GlobalAveragePool": _global_avg_pool, "Softmax": _softmax, "LSTM": _lstm, "GRU": _gru,
    "Reshape": _reshape, "Flatten": _flatten, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Transpose": lambda ins, at, scope: [np.transpose(ins[0], at.get("perm"))],
    "Concat": lambda ins, at, scope: [np.concatenate(ins, axis=at["axis"])],
    "Shape": lambda ins, at, scope: [np.array(ins[0].shape, dtype=np.int64)],
    "Slice": _slice, "Gather": _gather, "GatherND": _gather_nd, "TopK": _topk,
    "NonZero": lambda ins, at, scope: [np.array(np.nonzero(ins[0]), dtype=np.int64).reshape(ins[0].ndim, -1)],
    "ReduceMean": _reduce(np.mean), "ReduceSum": _reduce(np.sum), "ReduceMax": _reduce(np.max),
    "Constant": _constant, "ConstantOfShape": _constant_of_shape, "Expand": _expand, "Range": _range,
    "If": _if, "Loop": _loop,
}


def run_graph(graph, feeds, outer):
    """Evaluates `graph` with `feeds` (name -> array) on top of the values
    visible from enclosing graphs (`outer`); returns its outputs in order."""
    env = dict(outer)
    for init in graph.initializer:
        env[init.name] = numpy_helper.to_array(init)
    env.update(feeds)
    for idx, node in enumerate(graph.node):
        where = "node %d '%s' (%s)" % (idx, node.name, node.op_type)
        if node.domain not in ("", "ai.onnx"):
            raise OnnxEvalError("%s: domain '%s' is not supported" % (where, node.domain))
        op = OPS.get(node.op_type)
        if op is None:
            raise OnnxEvalError("%s: operator not supported by this interpreter" % where)
        try:
            ins = [env[n] if n else None for n in node.input]
        except KeyError as e:
            raise OnnxEvalError("%s: input %s is not defined" % (where, e)) from None
        try:
            at = _attrs(node)
            at["__node__"] = node.name
            outs = op(ins, at, env)
        except OnnxEvalError as e:
            raise OnnxEvalError("%s: %s" % (where, e)) from None
        except (ValueError, IndexError, TypeError) as e:
            raise OnnxEvalError("%s: %s: %s" % (where, type(e).__name__, e)) from None
        for name, value in zip(node.output, outs):
            if name:
                env[name] = np.asarray(value)
    return [env[o.name] for o in graph.output]


def run_model(model, feeds):
    """Runs the main graph of `model` on `feeds` (input name -> array)."""
    missing = [vi.name for vi in model.graph.input if vi.name not in feeds
               and vi.name not in {i.name for i in model.graph.initializer}]
    if missing:
        raise OnnxEvalError("inputs not given: %s" % ", ".join(missing))
    return run_graph(model.graph, feeds, {})
