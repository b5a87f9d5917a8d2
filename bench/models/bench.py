#!/usr/bin/python3
"""Model benchmark: Nimble side by side with ONNX Runtime and PyTorch eager.

Run through bench/models/run.sh (see there for the options). This driver
  1. generates the reference models it needs into the cache folder with the
     project's own generator (scripts/gen_reference_models.py; cheap when
     they are already there),
  2. installs onnxruntime-node 1.30 from npm into the cache folder
     (`npm install --ignore-scripts`: its install script only fetches GPU
     binaries; the CPU library is inside the package),
  3. writes one set of inputs per configuration (.npy, fixed seeds) that
     every framework reads, so all of them compute on the same data,
  4. starts one long-lived worker per peer (ort_worker.js, torch_worker.py)
     and, when the build has a `nimble` that can compile, compiles each
     model (timed) and runs it with nimble-run,
  5. measures in rounds, interleaved: every round runs every configuration
     on every framework in turn (A B C A B C ...; the order rotates each
     round), so the machine's noise falls on all of them alike,
  6. checks that the frameworks' first outputs agree within the model's
     tolerance, and prints a Markdown table of median and minimum latency
     with the ratios Nimble/ORT and Nimble/PyTorch.

Nimble's column is measured, never guessed: where the build has no
`nimble` compiler, or it cannot compile a model, the cell says
`n/a (reason)`.
"""
import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ORT_SPEC = "onnxruntime-node@1.30"

# (label, model, inputs): each input is (name, dtype, shape) for random data
# from a fixed seed, or (name, "int64", value) for a scalar.
CONFIGS = [
    ("lstm seq=8", "lstm", [("x", "float32", (8, 1, 128))]),
    ("lstm seq=32", "lstm", [("x", "float32", (32, 1, 128))]),
    ("lstm seq=128", "lstm", [("x", "float32", (128, 1, 128))]),
    ("lstm2 seq=128", "lstm2", [("x", "float32", (128, 1, 300))]),
    ("bert_tiny seq=16", "bert_tiny", [("x", "float32", (1, 16, 128))]),
    ("bert_tiny seq=64", "bert_tiny", [("x", "float32", (1, 64, 128))]),
    ("bert_tiny seq=128", "bert_tiny", [("x", "float32", (1, 128, 128))]),
    ("mlp batch=1", "mlp", [("x", "float32", (1, 784))]),
    ("mlp batch=64", "mlp", [("x", "float32", (64, 784))]),
    ("cnn batch=1", "cnn", [("x", "float32", (1, 3, 32, 32))]),
    ("squeezenet1_0 batch=1", "squeezenet1_0", [("x", "float32", (1, 3, 224, 224))]),
    ("mobilenet_v2 batch=1", "mobilenet_v2", [("x", "float32", (1, 3, 224, 224))]),
    ("loop_if n=100", "loop_if", [("x", "float32", (1, 16)), ("n", "int64", 100)]),
    ("treelstm per tree", "treelstm", None),
]
MODELS = list(dict.fromkeys(m for _, m, _ in CONFIGS))
TREES_PER_PASS = 20  # the generator's treelstm.json holds 20 trees


def log(msg):
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


def cell_text(text, limit=70):
    """One Markdown table cell: no pipes or newlines, bounded length."""
    text = " ".join(str(text).replace(REPO + os.sep, "").replace("|", "/").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fmt_ms(v):
    if v is None:
        return "—"
    if v >= 100:
        return "%.0f" % v
    if v >= 10:
        return "%.1f" % v
    if v >= 1:
        return "%.2f" % v
    return "%.3f" % v


# --- setup ---------------------------------------------------------------------

def generate_models(cache, models):
    cmd = [sys.executable, os.path.join(REPO, "scripts", "gen_reference_models.py"),
           os.path.join(cache, "models"), "--only", ",".join(models)]
    log("models: " + " ".join(shlex.quote(c) for c in cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("bench: the model generator failed (exit %d):\n%s" % (r.returncode, r.stdout))
    last = r.stdout.strip().splitlines()
    if last:
        log(last[-1])
    return os.path.join(cache, "models")


def install_ort(cache):
    """Returns (module_dir, None) or (None, reason)."""
    base = os.path.join(cache, "ort")
    mod = os.path.join(base, "node_modules", "onnxruntime-node")
    pkg = os.path.join(mod, "package.json")
    want = ORT_SPEC.split("@")[1]

    def installed_version():
        try:
            with open(pkg) as f:
                return json.load(f).get("version", "")
        except (OSError, ValueError):
            return None

    v = installed_version()
    if v is None or not (v == want or v.startswith(want + ".")):
        os.makedirs(base, exist_ok=True)
        manifest = os.path.join(base, "package.json")
        if not os.path.exists(manifest):
            with open(manifest, "w") as f:  # keeps npm from looking for a project further up
                json.dump({"name": "nimble-bench-ort", "private": True}, f)
        cmd = ["npm", "install", "--prefix", base, "--ignore-scripts", "--no-audit", "--no-fund", ORT_SPEC]
        log("onnxruntime: " + " ".join(cmd))
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, "npm install failed: %s" % e
        if r.returncode != 0:
            tail = r.stdout.strip().splitlines()[-1:] or ["?"]
            return None, "npm install failed: %s" % tail[0]
        v = installed_version()
        if v is None:
            return None, "npm install left no %s" % pkg
    return mod, None


def write_inputs(cache, models_dir, configs):
    """One .npy per input per configuration; the same files feed every
    framework. Checks the names against the model's json so that a change
    in the generator shows up here rather than as a confusing run error."""
    root = os.path.join(cache, "inputs")
    paths = {}
    for idx, (label, model, inputs) in enumerate(configs):
        if inputs is None:
            continue
        with open(os.path.join(models_dir, model + ".json")) as f:
            meta = json.load(f)
        declared = [i["name"] for i in meta["inputs"]]
        if declared != [i[0] for i in inputs]:
            sys.exit("bench: %s declares inputs %s, the benchmark feeds %s" % (model, declared, [i[0] for i in inputs]))
        rng = np.random.RandomState(1000 + idx)
        d = os.path.join(root, re.sub(r"[^A-Za-z0-9_.-]+", "_", label))
        os.makedirs(d, exist_ok=True)
        paths[label] = {}
        for name, dtype, shape in inputs:
            if dtype == "int64":
                arr = np.array(shape, dtype=np.int64)
            else:
                arr = rng.randn(*shape).astype(np.float32)
            p = os.path.join(d, name + ".npy")
            np.save(p, arr)
            paths[label][name] = p
    return paths


def tree_json(tree):
    """nimble-run's JSON for an ADT tree (docs/cli.md) from the reference's
    nested lists: a word id is {"Leaf": w}, [l, r] is {"Node": [l, r]}."""
    if isinstance(tree, int):
        return {"Leaf": tree}
    return {"Node": [tree_json(tree[0]), tree_json(tree[1])]}


def write_tree_inputs(cache, models_dir):
    """Per reference tree, nimble-run's inputs for examples/treelstm.nir: the
    tree as JSON and the weights (.npy from the generator), by the program's
    parameter names."""
    with open(os.path.join(models_dir, "treelstm.json")) as f:
        trees = json.load(f)["trees"]
    d = os.path.join(cache, "inputs", "treelstm")
    os.makedirs(d, exist_ok=True)
    weights = {"emb": "emb.weight", "leaf_w": "leaf.weight", "leaf_b": "leaf.bias",
               "node_w": "node.weight", "node_b": "node.bias"}
    per_tree = []
    for i, tree in enumerate(trees):
        p = os.path.join(d, "tree%02d.json" % i)
        with open(p, "w") as f:
            json.dump(tree_json(tree), f)
        inputs = {"tree": p}
        inputs.update({k: os.path.join(models_dir, "treelstm", v + ".npy") for k, v in weights.items()})
        per_tree.append(inputs)
    return per_tree


def machine_info():
    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            info["memory"] = "%.0f GiB" % (kb / 2 ** 20)
    except (OSError, ValueError, IndexError):
        pass
    return info


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


# --- peers -------------------------------------------------------------------

class Worker:
    """A peer in its own process, speaking one JSON line each way."""

    def __init__(self, name, argv, log_path):
        self.name = name
        self.dead = None
        self.log_path = log_path
        self.errlog = open(log_path, "w")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.errlog, text=True, bufsize=1)
        except OSError as e:
            self.proc = None
            self.dead = "cannot start %s: %s" % (argv[0], e)

    def call(self, **cmd):
        if self.dead:
            return {"ok": False, "error": self.dead}
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self.proc.wait()
            with open(self.log_path) as f:
                tail = f.read().strip().splitlines()[-1:] or ["no message"]
            self.dead = "%s worker exited (status %s): %s" % (self.name, self.proc.returncode, tail[0])
            return {"ok": False, "error": self.dead}
        return json.loads(line)

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.errlog.close()


class Nimble:
    """Nimble through its command-line tools:
         nimble compile MODEL.onnx --target=x86 -o M.nimble   (timed twice: an
             empty kernel cache, then warm)
         nimble-run M.nimble --input NAME=FILE.npy ... --repeat N --threads T
       nimble-run prints the median and minimum of its N runs."""

    LATENCY = re.compile(r"median ([0-9.]+) ms, min ([0-9.]+) ms")

    def __init__(self, build, cache, threads):
        self.cli = os.environ.get("NIMBLE_BIN") or os.path.join(build, "client", "nimble")
        self.runner = os.environ.get("NIMBLE_RUN_BIN") or os.path.join(build, "runtime", "tools", "nimble-run")
        self.dir = os.path.join(cache, "nimble")
        self.threads = threads
        self.reason = None
        rel = lambda p: os.path.relpath(p, REPO) if p.startswith(REPO + os.sep) else p  # noqa: E731
        if not os.access(self.cli, os.X_OK):
            self.reason = "%s not built" % rel(self.cli)
        elif not os.access(self.runner, os.X_OK):
            self.reason = "%s not built" % rel(self.runner)
        self.compiled = {}  # model -> (path, seconds) or (None, reason)

    def compile(self, model, source):
        if self.reason:
            return None, self.reason
        if model in self.compiled:
            return self.compiled[model]
        os.makedirs(self.dir, exist_ok=True)
        out = os.path.join(self.dir, model + ".nimble")
        if os.path.exists(out):
            os.unlink(out)  # a stale file from an older compiler must not be run
        cmd = [self.cli, "compile", source, "--target=x86", "-o", out]
        # Cold: an empty kernel cache of this model's own; warm: the same
        # compile again, every kernel a cache hit.
        kcache = os.path.join(self.dir, "kernel-cache", model)
        shutil.rmtree(kcache, ignore_errors=True)
        env = dict(os.environ, NIMBLE_KERNEL_CACHE=kcache)
        log("nimble: " + " ".join(cmd) + " (cold, then warm kernel cache)")
        secs = []
        res = None
        for _ in range(2):
            t0 = time.perf_counter()
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
                                   env=env)
            except subprocess.TimeoutExpired:
                res = (None, "compile ran over 600 s")
            except OSError as e:
                res = (None, "cannot run %s: %s" % (self.cli, e))
            else:
                secs.append(time.perf_counter() - t0)
                if r.returncode != 0 or not os.path.exists(out):
                    msg = (r.stderr.strip() or r.stdout.strip() or "no message").splitlines()[0]
                    res = (None, "compile failed: %s" % msg)
            if res:
                break
        if not res:
            res = (out, tuple(secs))  # (cold, warm) seconds
        self.compiled[model] = res
        return res

    def run(self, exe, inputs, repeat, outdir):
        """Returns ((median_ms, min_ms), None) or (None, reason)."""
        os.makedirs(outdir, exist_ok=True)
        cmd = [self.runner, exe]
        for name, path in inputs.items():
            cmd += ["--input", "%s=%s" % (name, path)]
        cmd += ["--repeat", str(repeat), "--threads", str(self.threads), "--output-dir", outdir]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return None, "nimble-run ran over 600 s"
        if r.returncode != 0:
            return None, "run failed: %s" % ((r.stderr.strip() or "no message").splitlines()[0])
        m = self.LATENCY.search(r.stdout)
        if not m:
            return None, "nimble-run printed no latency line"
        return (float(m.group(1)), float(m.group(2))), None


# --- measurement ---------------------------------------------------------------

class Cell:
    """One framework on one configuration: samples, or why there are none."""

    def __init__(self, reason=None):
        self.samples = []      # individual run times (ORT, PyTorch)
        self.batches = []      # (median, min, runs) per nimble-run batch (Nimble)
        self.reason = reason
        self.compile_s = None

    def ok(self):
        return self.reason is None

    def median(self):
        if self.samples:
            return float(np.median(self.samples))
        if self.batches:
            return float(np.median([b[0] for b in self.batches]))
        return None

    def minimum(self):
        if self.samples:
            return float(min(self.samples))
        if self.batches:
            return float(min(b[1] for b in self.batches))
        return None

    def runs(self):
        return len(self.samples) if self.samples else sum(b[2] for b in self.batches)


def compare(models_dir, model, a_path, b_path):
    """(agree, max |diff|) of two saved first outputs, with the model's tolerance."""
    with open(os.path.join(models_dir, model + ".json")) as f:
        tol = json.load(f)["tolerance"]
    a, b = np.load(a_path), np.load(b_path)
    if a.shape != b.shape:
        return False, "shape %s vs %s" % (a.shape, b.shape)
    diff = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) if a.size else 0.0
    return bool(np.allclose(a, b, rtol=tol["rtol"], atol=tol["atol"])), diff


def check_trees(models_dir, outdir):
    """Nimble's root h and c for every tree (output0/output1: a .nir program's
    outputs have no names) against the stored PyTorch reference."""
    with open(os.path.join(models_dir, "treelstm.json")) as f:
        tol = json.load(f)["tolerance"]
    want = [np.load(os.path.join(models_dir, "treelstm", k + ".npy")) for k in ("root_h", "root_c")]
    worst, ok = 0.0, True
    for i in range(want[0].shape[0]):
        for o in range(2):
            p = os.path.join(outdir, "tree%02d" % i, "output%d.npy" % o)
            if not os.path.exists(p):
                return "Nimble: no output file for tree %d" % i
            got = np.load(p)
            if got.shape != want[o][i].shape:
                return "Nimble NO (tree %d: shape %s)" % (i, got.shape)
            worst = max(worst, float(np.abs(got.astype(np.float64) - want[o][i]).max()))
            ok &= bool(np.allclose(got, want[o][i], rtol=tol["rtol"], atol=tol["atol"]))
    return "Nimble root h, c %s (max diff %.1e)" % ("yes" if ok else "NO", worst)


def main():
    ap = argparse.ArgumentParser(prog="bench/models/run.sh", description="Nimble vs ONNX Runtime vs PyTorch: model latency.")
    ap.add_argument("--threads", type=int, choices=(1, 2), default=1)
    ap.add_argument("--repeat", type=int, default=60,
                    help="timed runs per configuration and framework, over all rounds (default 60)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--max-batch-s", type=float, default=1.0,
                    help="a framework's turn stops after this many seconds (at least 3 runs)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--out", default=None, help="also write the Markdown report here")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="Nimble build folder (default build/)")
    ap.add_argument("--cache", default=os.environ.get("NIMBLE_BENCH_CACHE", os.path.join(HERE, ".cache")))
    ap.add_argument("--openblas-coretype", default=None, metavar="NAME",
                    help="set OPENBLAS_CORETYPE for the measured frameworks (default: leave the environment as is)")
    ap.add_argument("--command", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.repeat < 3 or a.repeat > 100000:
        ap.error("--repeat must be from 3 to 100000")
    if not 0.01 <= a.max_batch_s <= 60:
        ap.error("--max-batch-s must be from 0.01 to 60")
    if a.rounds < 1 or a.rounds > a.repeat:
        ap.error("--rounds must be from 1 to --repeat")
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        ap.error("unknown model(s) %s; choose from %s" % (",".join(unknown) or "(none)", ",".join(MODELS)))
    configs = [c for c in CONFIGS if c[1] in models]
    cache = os.path.abspath(a.cache)
    os.makedirs(cache, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc)
    load_start = loadavg()

    # The generator runs under the caller's environment: OPENBLAS_CORETYPE is
    # part of its digest, and the models must not be remade for a benchmark.
    models_dir = generate_models(cache, models)
    inputs = write_inputs(cache, models_dir, configs)
    if a.openblas_coretype:
        if not re.fullmatch(r"[A-Za-z0-9_]+", a.openblas_coretype):
            ap.error("--openblas-coretype: '%s' is not a core name" % a.openblas_coretype)
        os.environ["OPENBLAS_CORETYPE"] = a.openblas_coretype
    outputs = os.path.join(cache, "outputs")
    for peer in ("ort", "torch", "nimble"):
        os.makedirs(os.path.join(outputs, peer), exist_ok=True)

    ort_mod, ort_reason = install_ort(cache)
    ort = None
    if ort_mod:
        ort = Worker("ort", ["node", os.path.join(HERE, "ort_worker.js"), ort_mod, str(a.threads)],
                     os.path.join(cache, "ort_worker.log"))
    torch_w = Worker("torch", [sys.executable, os.path.join(HERE, "torch_worker.py"), REPO, str(a.threads)],
                     os.path.join(cache, "torch_worker.log"))
    nimble = Nimble(os.path.abspath(a.build), cache, a.threads)

    info = {"ort": ort.call(cmd="info") if ort else {"ok": False, "error": ort_reason},
            "torch": torch_w.call(cmd="info")}
    if not info["torch"].get("ok"):
        log("PyTorch worker: %s" % info["torch"].get("error"))

    # Load every configuration on every framework; record why one cannot run.
    cells = {}
    safe = lambda label: re.sub(r"[^A-Za-z0-9_.-]+", "_", label)  # noqa: E731
    for label, model, spec in configs:
        row = cells[label] = {}
        tag = safe(label)
        log("loading %s" % label)
        # ONNX Runtime
        if model == "treelstm":
            row["ort"] = Cell("no ONNX model: recursion over a tree")
        elif not ort:
            row["ort"] = Cell(ort_reason)
        else:
            r = ort.call(cmd="load", id=label, model=os.path.join(models_dir, model + ".onnx"),
                         inputs=inputs[label], out=os.path.join(outputs, "ort", tag + ".npy"))
            row["ort"] = Cell(None if r.get("ok") else r.get("error"))
        # PyTorch eager
        if model == "treelstm":
            r = torch_w.call(cmd="load", id=label, model="treelstm",
                             trees=os.path.join(models_dir, "treelstm.json"))
        else:
            r = torch_w.call(cmd="load", id=label, model=model, inputs=inputs[label],
                             out=os.path.join(outputs, "torch", tag + ".npy"))
        row["torch"] = Cell(None if r.get("ok") else r.get("error"))
        # Nimble: compile (timed, once per model), then nimble-run per config.
        if model == "treelstm":
            source = os.path.join(REPO, "examples", "treelstm.nir")
        else:
            source = os.path.join(models_dir, model + ".onnx")
        exe, secs = nimble.compile(model, source)
        if exe is None:
            row["nimble"] = Cell(secs)
        elif model == "treelstm":
            row["nimble"] = Cell()
            row["nimble"].compile_s = secs
            row["nimble"].exe = exe
            row["nimble"].trees = write_tree_inputs(cache, models_dir)
        else:
            row["nimble"] = Cell()
            row["nimble"].compile_s = secs
            row["nimble"].exe = exe
        for peer in ("ort", "torch", "nimble"):
            if not row[peer].ok():
                log("  %s: %s" % (peer, row[peer].reason))

    # Interleaved rounds.
    per_round = max(1, math.ceil(a.repeat / a.rounds))
    peers = ["ort", "torch", "nimble"]
    t_measure = time.perf_counter()
    for rnd in range(a.rounds):
        order = peers[rnd % 3:] + peers[: rnd % 3]
        log("round %d/%d" % (rnd + 1, a.rounds))
        for label, model, spec in configs:
            row = cells[label]
            runs = per_round
            if model == "treelstm":  # whole passes over the trees, so every tree counts alike
                runs = TREES_PER_PASS * max(1, math.ceil(per_round / TREES_PER_PASS))
            for peer in order:
                cell = row[peer]
                if not cell.ok():
                    continue
                if peer == "nimble" and model == "treelstm":
                    # One nimble-run per tree (it runs one input set), n runs
                    # each: a batch's median is that tree's; the cell's median
                    # is over trees and rounds, like PyTorch's over its runs.
                    trees = cell.trees
                    n = max(3, runs // len(trees))
                    med = cell.median()
                    if med:
                        n = max(3, min(n, int(2 * a.max_batch_s * 1000 / len(trees) / max(med, 1e-3))))
                    for i, tree_inputs in enumerate(trees):
                        res, why = nimble.run(cell.exe, tree_inputs, n,
                                              os.path.join(outputs, "nimble", safe(label), "tree%02d" % i))
                        if why:
                            cell.reason = "tree %d: %s" % (i, why)
                            break
                        cell.batches.append(res + (n,))
                    continue
                if peer == "nimble":
                    n = runs
                    med = cell.median()
                    if med:  # nimble-run cannot stop on time; size the batch from earlier ones
                        n = max(3, min(runs, int(a.max_batch_s * 1000 / max(med, 1e-3))))
                    res, why = nimble.run(cell.exe, inputs[label], n,
                                          os.path.join(outputs, "nimble", safe(label)))
                    if why:
                        cell.reason = why
                    else:
                        cell.batches.append(res + (n,))
                    continue
                w = ort if peer == "ort" else torch_w
                r = w.call(cmd="time", id=label, warmup=1, runs=runs,
                           max_s=a.max_batch_s * (2 if model == "treelstm" else 1))
                if r.get("ok"):
                    cell.samples.extend(r["times_ms"])
                else:
                    cell.reason = r.get("error")
    measure_s = time.perf_counter() - t_measure
    for w in (ort, torch_w):
        if w:
            w.close()

    # Output agreement (first output), each framework against PyTorch.
    checks = {}
    for label, model, spec in configs:
        if model == "treelstm":
            notes = ["PyTorch root h = stored reference" if cells[label]["torch"].ok() else "PyTorch —"]
            if cells[label]["nimble"].ok():
                notes.append(check_trees(models_dir, os.path.join(outputs, "nimble", safe(label))))
            checks[label] = "; ".join(notes)
            continue
        tag = safe(label)
        ref = os.path.join(outputs, "torch", tag + ".npy")
        notes = []
        for peer, name in (("ort", "ORT"), ("nimble", "Nimble")):
            if not cells[label][peer].ok() or not cells[label]["torch"].ok():
                continue
            if peer == "ort":
                got = os.path.join(outputs, "ort", tag + ".npy")
            else:
                with open(os.path.join(models_dir, model + ".json")) as f:
                    first = json.load(f)["outputs"][0]["name"]
                d = os.path.join(outputs, "nimble", tag)
                got = os.path.join(d, first + ".npy")  # nimble-run names files after the model's outputs
            if not os.path.exists(got):
                notes.append("%s: no output file" % name)
                continue
            agree, diff = compare(models_dir, model, got, ref)
            notes.append("%s %s (%s)" % (name, "yes" if agree else "NO",
                                         diff if isinstance(diff, str) else "max diff %.1e" % diff))
        checks[label] = "; ".join(notes) if notes else "—"

    # Report.
    mi = machine_info()
    t_info, o_info = info["torch"], info["ort"]
    lines = []
    lines.append("Run %s UTC, %.0f s of interleaved measurement." % (started.strftime("%Y-%m-%d %H:%M"), measure_s))
    lines.append("")
    lines.append("- command: `%s`" % (a.command or " ".join(shlex.quote(x) for x in sys.argv)))
    lines.append("- machine: %s, %s cores, %s, Linux %s; load average %s at the start, %s at the end"
                 % (mi.get("cpu"), mi.get("cores"), mi.get("memory", "?"), mi.get("kernel"), load_start, loadavg()))
    lines.append("- threads: %d (ORT intra-op %d / inter-op 1, sequential; PyTorch set_num_threads(%d), "
                 "OMP/MKL/OPENBLAS_NUM_THREADS=%d; nimble-run --threads %d)"
                 % (a.threads, a.threads, a.threads, a.threads, a.threads))
    lines.append("- OpenBLAS (PyTorch's BLAS): OPENBLAS_CORETYPE=%s, OPENBLAS_L2_SIZE=%s, kernels in use: %s; "
                 "OMP_WAIT_POLICY=%s"
                 % (os.environ.get("OPENBLAS_CORETYPE", "(unset)"), os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
                    t_info.get("openblas_core", "?"), t_info.get("omp_wait_policy", "?")))
    lines.append("- peers: ONNX Runtime %s (npm onnxruntime-node, CPU EP, all graph optimizations); "
                 "PyTorch %s eager (Debian)%s"
                 % (o_info.get("version") if o_info.get("ok") else "n/a (%s)" % o_info.get("error"),
                    t_info.get("version") if t_info.get("ok") else "n/a",
                    "" if t_info.get("ok") else " (%s)" % t_info.get("error")))
    lines.append("- method: %d rounds; in each, every configuration runs on each framework in turn "
                 "(order rotating per round), 1 untimed run then up to %d timed runs or %.1f s; "
                 "median and min over all timed runs (Nimble: median of nimble-run's per-round medians, "
                 "min of its minimums). Latency in ms."
                 % (a.rounds, per_round, a.max_batch_s))
    core = t_info.get("openblas_core", "")
    if core.lower() in ("prescott", "generic", "core2", "katmai", "northwood", "banias"):
        lines.append("- **note**: OpenBLAS runs its %s (pre-AVX) fallback kernels on this CPU, so PyTorch's "
                     "matrix products are far slower than they need be; `--openblas-coretype` picks a kernel set "
                     "(e.g. Haswell for AVX2, SkylakeX for AVX-512)" % core)
    lines.append("")
    hdr = ["config", "ORT median", "ORT min", "PyTorch median", "PyTorch min", "Nimble median", "Nimble min",
           "Nimble/ORT", "Nimble/PyTorch", "Nimble compile cold/warm (s)", "runs ORT/PT/Nimble", "outputs agree with PyTorch"]
    lines.append("| " + " | ".join(hdr) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * 10 + ["---"]) + "|")
    reasons = {}

    def na(cell):
        short = cell_text(cell.reason, 60)
        if short != " ".join(str(cell.reason).split()):
            reasons.setdefault(short, cell.reason)
        return "n/a (%s)" % short

    seen_models = set()
    for label, model, spec in configs:
        row = cells[label]
        cols = [label]
        for peer in ("ort", "torch", "nimble"):
            c = row[peer]
            if c.ok() and c.runs():
                cols += [fmt_ms(c.median()), fmt_ms(c.minimum())]
            else:
                cols += [na(c) if c.reason else "—", "—"]
        n = row["nimble"]
        for peer in ("ort", "torch"):
            p = row[peer]
            if n.ok() and n.runs() and p.ok() and p.runs():
                cols.append("%.2fx" % (n.median() / p.median()))
            else:
                cols.append("—")
        if model in seen_models:
            cols.append("″")
        elif n.compile_s is not None:
            cols.append("%.2f / %.2f" % n.compile_s)
        else:
            cols.append(na(n) if n.reason else "—")
        seen_models.add(model)
        cols.append("/".join(str(row[p].runs()) if row[p].ok() else "0" for p in ("ort", "torch", "nimble")))
        cols.append(cell_text(checks.get(label, "—"), 90))
        lines.append("| " + " | ".join(cols) + " |")
    lines.append("")
    lines.append("Ratios are Nimble's median over the peer's (below 1: Nimble is faster). "
                 "Tree-LSTM: one timed run is one tree (20 trees of 20–40 leaves, in turn); Nimble runs "
                 "each tree with its own nimble-run (JSON tree input), and its median is over the per-tree "
                 "medians.")
    if reasons:
        lines.append("")
        lines.append("Why a cell is n/a:")
        for short, full in reasons.items():
            lines.append("- %s: %s" % (short, cell_text(full, 400)))
    report = "\n".join(lines) + "\n"
    sys.stdout.write(report)
    if a.out:
        with open(a.out, "w") as f:
            f.write(report)
        log("report written to %s" % a.out)


if __name__ == "__main__":
    main()
