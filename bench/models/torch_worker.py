#!/usr/bin/python3
"""PyTorch eager side of the model benchmark (bench/models/bench.py drives it).

    /usr/bin/python3 torch_worker.py REPO_ROOT THREADS

A long-lived worker, so that the driver can interleave it with the other
frameworks. One JSON command per line on stdin, one JSON answer per line on
stdout (the same protocol as ort_worker.js):
  {"cmd":"load","id":ID,"model":NAME,"inputs":{NAME:PATH.npy},"out":PATH.npy}
      builds NAME from the project's own definitions (scripts/refmodels, the
      seeds that made the ONNX files, so the weights are the same), runs 3
      warm-up runs and writes the first output to "out".
  {"cmd":"load","id":ID,"model":"treelstm","trees":PATH/treelstm.json}
      the Tree-LSTM, eager recursion; each timed run is one tree, in turn.
      Loading checks every root h against the generator's stored reference.
  {"cmd":"time","id":ID,"warmup":W,"runs":K,"max_s":S}  -> {"times_ms":[...]}
  {"cmd":"info"}  -> torch version, threads, OpenBLAS core.

Threads: OMP/MKL/OPENBLAS_NUM_THREADS are set to THREADS before torch is
imported (Debian's torch calls BLAS through the libblas.so.3 alternative,
OpenBLAS, which does not follow torch.set_num_threads), then
torch.set_num_threads(THREADS) and one inter-op thread. OMP_WAIT_POLICY
defaults to PASSIVE: spinning OpenMP workers would keep burning a core
while the other frameworks take their turn in the interleaved run.
"""
import json
import os
import sys
import time

if len(sys.argv) != 3:
    sys.stderr.write("usage: torch_worker.py REPO_ROOT THREADS\n")
    sys.exit(2)
REPO, THREADS = sys.argv[1], int(sys.argv[2])
for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[var] = str(THREADS)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(REPO, "scripts"))
from refmodels import catalog  # noqa: E402

torch.set_num_threads(THREADS)
try:
    torch.set_num_interop_threads(1)
except RuntimeError:  # already fixed by an earlier parallel call
    pass


def openblas_core():
    """The kernel set of the OpenBLAS torch actually loaded (the CPU model
    or OPENBLAS_CORETYPE decides it; an unknown CPU gets the Prescott
    fallback). ctypes on an already-loaded path returns that same copy."""
    import ctypes
    with open("/proc/self/maps") as f:
        libs = sorted({line.split()[-1] for line in f if "openblas" in line and line.rstrip().endswith((".so", ".so.0", ".so.3"))})
    for lib in libs:
        try:
            so = ctypes.CDLL(lib)
            so.openblas_get_corename.restype = ctypes.c_char_p
            return so.openblas_get_corename().decode()
        except (OSError, AttributeError):
            continue
    return "unknown (no OpenBLAS loaded)"


def save_npy(path, tensor):
    np.save(path, np.ascontiguousarray(tensor.detach().numpy()))


def load_treelstm(cmd):
    spec = catalog.MODELS["treelstm"]()
    net = spec.net
    with open(cmd["trees"]) as f:
        doc = json.load(f)
    trees = doc["trees"]
    if trees != spec.trees:
        raise ValueError("%s: the trees differ from scripts/refmodels' random_trees" % cmd["trees"])
    # The weights must be the ones the generator stored; checking the roots
    # against its reference ties this recursion to the .nir program's data.
    want_h = np.load(os.path.join(os.path.dirname(cmd["trees"]), "treelstm", "root_h.npy"))
    tol = doc.get("tolerance", {"rtol": 1e-4, "atol": 1e-5})
    for i, tree in enumerate(trees):
        h, _ = net(tree)
        got = h.detach().numpy()[0]
        if not np.allclose(got, want_h[i], rtol=tol["rtol"], atol=tol["atol"]):
            raise ValueError("treelstm tree %d: root h differs from the stored reference "
                             "(max |diff| %.3g)" % (i, float(np.abs(got - want_h[i]).max())))
    state = {"next": 0}

    def run():
        tree = trees[state["next"]]
        state["next"] = (state["next"] + 1) % len(trees)
        return net(tree)

    return run


def load(cmd):
    if cmd["model"] == "treelstm":
        return load_treelstm(cmd)
    if cmd["model"] not in catalog.MODELS:
        raise ValueError("unknown model '%s' (scripts/refmodels has %s)" % (cmd["model"], ", ".join(catalog.MODELS)))
    spec = catalog.MODELS[cmd["model"]]()
    if list(cmd["inputs"]) != list(spec.inputs):
        raise ValueError("model %s takes inputs %s, given %s" % (cmd["model"], spec.inputs, list(cmd["inputs"])))
    args = tuple(torch.from_numpy(np.load(cmd["inputs"][n])) for n in spec.inputs)
    net = spec.net

    def run():
        return net(*args)

    out = None
    for _ in range(3):
        out = run()
    if cmd.get("out"):
        save_npy(cmd["out"], out[0] if isinstance(out, tuple) else out)
    return run


def main():
    fns = {}
    with torch.inference_mode():
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                cmd = json.loads(line)
                if cmd["cmd"] == "load":
                    fns[cmd["id"]] = load(cmd)
                    reply = {}
                elif cmd["cmd"] == "time":
                    fn = fns[cmd["id"]]
                    for _ in range(cmd["warmup"]):
                        fn()
                    ts = []
                    t0 = time.perf_counter()
                    while len(ts) < cmd["runs"] and (len(ts) < 3 or time.perf_counter() - t0 < cmd["max_s"]):
                        s = time.perf_counter()
                        fn()
                        ts.append((time.perf_counter() - s) * 1e3)
                    reply = {"times_ms": ts}
                elif cmd["cmd"] == "info":
                    reply = {"version": torch.__version__, "threads": torch.get_num_threads(),
                             "openblas_core": openblas_core(),
                             "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}
                else:
                    raise ValueError("unknown command %r" % cmd["cmd"])
                reply["ok"] = True
            except Exception as e:  # reported to the driver, which names the config
                reply = {"ok": False, "error": ("%s: %s" % (type(e).__name__, e)).replace("\n", " ")}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
