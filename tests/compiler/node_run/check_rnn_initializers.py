#!/usr/bin/python3
"""LSTM, GRU and RNN whose weights are initializers, compiled by `nimble
compile` and run by `nimble-run`, against a float64 NumPy loop written from
the ONNX operator specification.

The ONNX node suite feeds W, R and B as graph inputs, so it never reaches
the importer's constant path (the recurrent weights sliced per direction
and, up to 1 MiB, transposed, W's direction sliced and the biases summed
at import); the reference models
reach it for one forward LSTM only. These cases cover the directions, GRU
with and without linear_before_reset, RNN, peepholes and a missing bias.
Each LSTM, GRU and RNN must import as one lstm_scan, gru_scan or rnn_scan
for all its directions (`nimble inspect --json`'s op counts): the
recursion over steps they replace computes the same values, several times
slower, and two scans would run the directions one after the other.

    /usr/bin/python3 check_rnn_initializers.py NIMBLE NIMBLE_RUN

Needs onnx and numpy (Debian's python3-onnx, python3-numpy: /usr/bin/python3).
Exits 1 naming every case that differs.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

T, BATCH, I = 5, 2, 3


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def ref_lstm(x, w, r, b, p, reverse):
    """One direction: x [T, B, I], w [4H, I], r [4H, H], b [8H], p [3H]."""
    H = r.shape[1]
    h = np.zeros((x.shape[1], H))
    c = np.zeros((x.shape[1], H))
    ys = [None] * x.shape[0]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in steps:
        g = x[t] @ w.T + h @ r.T + b[:4 * H] + b[4 * H:]
        gi, go, gf, gc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        pi, po, pf = p[:H], p[H:2 * H], p[2 * H:]
        i = sigmoid(gi + pi * c)
        f = sigmoid(gf + pf * c)
        c = f * c + i * np.tanh(gc)
        o = sigmoid(go + po * c)
        h = o * np.tanh(c)
        ys[t] = h
    return np.stack(ys), h, c


def ref_gru(x, w, r, b, lbr, reverse):
    H = r.shape[1]
    h = np.zeros((x.shape[1], H))
    ys = [None] * x.shape[0]
    wz, wr, wh = w[:H], w[H:2 * H], w[2 * H:]
    rz, rr, rh = r[:H], r[H:2 * H], r[2 * H:]
    wbz, wbr, wbh = b[:H], b[H:2 * H], b[2 * H:3 * H]
    rbz, rbr, rbh = b[3 * H:4 * H], b[4 * H:5 * H], b[5 * H:]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in steps:
        z = sigmoid(x[t] @ wz.T + h @ rz.T + wbz + rbz)
        rg = sigmoid(x[t] @ wr.T + h @ rr.T + wbr + rbr)
        if lbr:
            hh = np.tanh(x[t] @ wh.T + rg * (h @ rh.T + rbh) + wbh)
        else:
            hh = np.tanh(x[t] @ wh.T + (rg * h) @ rh.T + rbh + wbh)
        h = (1 - z) * hh + z * h
        ys[t] = h
    return np.stack(ys), h


def ref_rnn(x, w, r, b, reverse):
    H = r.shape[1]
    h = np.zeros((x.shape[1], H))
    ys = [None] * x.shape[0]
    steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
    for t in steps:
        h = np.tanh(x[t] @ w.T + h @ r.T + b[:H] + b[H:])
        ys[t] = h
    return np.stack(ys), h


def case(name, op, direction, gates, bias=True, peep=False, lbr=0, H=4, seed=0):
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    x = rng.uniform(-1, 1, (T, BATCH, I)).astype(np.float32)
    w = rng.uniform(-0.6, 0.6, (dirs, gates * H, I)).astype(np.float32)
    # Scaled so that h R^T stays about as large at any H (sums of H terms).
    r = (rng.uniform(-0.6, 0.6, (dirs, gates * H, H)) * min(1.0, 2.0 / np.sqrt(H))).astype(np.float32)
    b = rng.uniform(-0.4, 0.4, (dirs, 2 * gates * H)).astype(np.float32)
    p = rng.uniform(-0.5, 0.5, (dirs, 3 * H)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    inputs = ["X", "W", "R"]
    if bias or peep:
        inputs.append("B" if bias else "")
    if bias:
        inits.append(numpy_helper.from_array(b, "B"))
    if peep:
        inputs += ["", "", "", "P"]
        inits.append(numpy_helper.from_array(p, "P"))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    attrs = {"hidden_size": H, "direction": direction}
    if op == "GRU":
        attrs["linear_before_reset"] = lbr
    node = helper.make_node(op, inputs, outs, **attrs)
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
    graph = helper.make_graph([node], name, [vi("X", [T, BATCH, I])],
                              [vi("Y", [T, dirs, BATCH, H]), vi("Y_h", [dirs, BATCH, H])] +
                              ([vi("Y_c", [dirs, BATCH, H])] if op == "LSTM" else []), inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    # The reference, direction by direction, in float64.
    want = {n: [] for n in outs}
    x64 = x.astype(np.float64)
    bz = b.astype(np.float64) if bias else np.zeros(2 * gates * H)
    pz = p.astype(np.float64) if peep else np.zeros(3 * H)
    for d in range(dirs):
        rev = direction == "reverse" or d == 1
        w64, r64 = w[d].astype(np.float64), r[d].astype(np.float64)
        if op == "LSTM":
            res = ref_lstm(x64, w64, r64, bz[d] if bias else bz, pz[d] if peep else pz, rev)
        elif op == "GRU":
            res = ref_gru(x64, w64, r64, bz[d] if bias else bz, lbr, rev)
        else:
            res = ref_rnn(x64, w64, r64, bz[d] if bias else bz, rev)
        for n, v in zip(outs, res):
            want[n].append(v)
    want = {"Y": np.stack(want["Y"], axis=1), **{n: np.stack(want[n]) for n in outs[1:]}}
    return model, x, want


CASES = [
    ("lstm_bidirectional", "LSTM", "bidirectional", 4, {}),
    ("lstm_reverse_no_bias", "LSTM", "reverse", 4, {"bias": False}),
    ("lstm_peepholes", "LSTM", "forward", 4, {"peep": True}),
    ("gru_forward", "GRU", "forward", 3, {}),
    ("gru_bidirectional_lbr", "GRU", "bidirectional", 3, {"lbr": 1}),
    ("gru_reverse_no_bias_lbr", "GRU", "reverse", 3, {"bias": False, "lbr": 1}),
    ("rnn_bidirectional", "RNN", "bidirectional", 1, {}),
    ("rnn_forward_no_bias", "RNN", "forward", 1, {"bias": False}),
    # Recurrent matrices over 1 MiB stay untransposed (dot products over
    # R's rows): 4 * 272 * 272 and 544 * 544 floats.
    ("lstm_large_bidirectional", "LSTM", "bidirectional", 4, {"H": 272}),
    ("gru_large", "GRU", "forward", 3, {"H": 544}),
]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check_rnn_initializers.py NIMBLE NIMBLE_RUN")
    nimble, nimble_run = sys.argv[1:]
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, op, direction, gates, kw) in enumerate(CASES):
            model, x, want = case(name, op, direction, gates, seed=k, **kw)
            d = os.path.join(tmp, name)
            os.makedirs(d)
            mpath, exe, xpath = (os.path.join(d, f) for f in ("model.onnx", "model.nimble", "x.npy"))
            onnx.save(model, mpath)
            np.save(xpath, x)
            p = subprocess.run([nimble, "inspect", "--json", mpath], capture_output=True, text=True)
            ops = json.loads(p.stdout).get("op_counts", {}) if p.returncode == 0 else {}
            scan_op = {"LSTM": "lstm_scan", "GRU": "gru_scan", "RNN": "rnn_scan"}[op]
            if p.returncode != 0:
                failed.append("%s: nimble inspect failed: %s" % (name, p.stderr.strip()))
            elif ops.get(scan_op) != 1:
                failed.append("%s: one %s expected, op counts %s" % (name, scan_op, ops))
            # Two directions run as two tasks: at 2 threads on two cores.
            runs = [("1", d)] + ([("2", os.path.join(d, "t2"))] if direction == "bidirectional" else [])
            cmds = [[nimble, "compile", mpath, "--target=x86", "-o", exe]]
            for threads, out in runs:
                os.makedirs(out, exist_ok=True)
                cmds.append([nimble_run, exe, "--input", "X=" + xpath, "--output-dir", out, "--threads", threads])
            for cmd in cmds:
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    failed.append("%s: %s failed: %s" % (name, os.path.basename(cmd[0]), p.stderr.strip()))
                    break
            else:
                for threads, out in runs:
                    for n, v in want.items():
                        got = np.load(os.path.join(out, n + ".npy"))
                        err = np.abs(got.astype(np.float64) - v).max() if got.shape == v.shape else None
                        if err is None or err > 1e-5:
                            failed.append("%s: %s %s at %s thread(s), max difference %s"
                                          % (name, n, got.shape, threads, err))
            print("%s: %s" % (name, "ok" if not failed or not failed[-1].startswith(name + ":") else "FAILED"))
    for f in failed:
        print(f, file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
