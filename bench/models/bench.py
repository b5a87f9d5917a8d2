#!/usr/bin/python3
"""Model benchmark: Nimble side by side with ONNX Runtime and PyTorch eager.

Run through bench/models/run.sh (see there for the options). This driver
  1. generates the reference models it needs into the cache folder with the
     project's own generator (scripts/gen_reference_models.py; cheap when
     they are already there),
  2. installs onnxruntime-node 1.30 from npm into the cache folder
     (`npm install --ignore-scripts`: its install script only fetches GPU
     binaries; the CPU library libonnxruntime.so.1 is inside the package)
     and builds ort_capi.c with cc (ONNX Runtime through its C API, on that
     same library),
  3. writes one set of inputs per configuration (.npy, fixed seeds) that
     every framework reads, so all of them compute on the same data,
  4. starts one long-lived worker per peer and thread count (ort_capi
     --serve, ort_worker.js, torch_worker.py: one JSON line each way) and,
     when the build has a `nimble` that can compile, compiles each model
     (timed) and runs it with nimble-run --threads N (a fresh process per
     batch, with about WARMUP_MS of untimed runs first; at more than one
     thread PROBE_AFTER_MS plus PROBE_INVOKES runs, past the VM's probe),
  5. measures in rounds, interleaved: every round runs every configuration
     at every thread count on every framework in turn (A B C D, B C D A,
     ...: the order rotates each round), so the machine's noise falls on all
     of them alike,
  6. checks that the frameworks' first outputs agree with PyTorch's within
     the model's tolerance, and prints one Markdown table per thread count
     of median and minimum latency with the ratios Nimble/ORT-C (the one
     that counts: ORT without the node binding's per-call overhead),
     Nimble/ORT-node and Nimble/PyTorch.

Nimble's column is measured, never guessed: where the build has no
`nimble` compiler, or it cannot compile a model, the cell says
`n/a (reason)`.
"""
import argparse
import datetime
import glob
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
    ("gru seq=8", "gru", [("x", "float32", (8, 1, 128))]),
    ("gru seq=128", "gru", [("x", "float32", (128, 1, 128))]),
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


def ort_library(mod):
    """The CPU libonnxruntime.so.1 inside the onnxruntime-node package (the
    one its node binding loads): (path, None) or (None, reason)."""
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    hits = sorted(glob.glob(os.path.join(mod, "bin", "napi-v*", "linux", arch, "libonnxruntime.so.1")))
    if not hits:
        return None, "no bin/napi-v*/linux/%s/libonnxruntime.so.1 in %s" % (arch, mod)
    return hits[-1], None


def build_ort_capi(cache):
    """ort_capi (ort_capi.c: ONNX Runtime through its C API): $NIMBLE_ORT_CAPI
    when set, else compiled with cc into the cache when missing or older than
    its source. It needs no ONNX Runtime header, only libdl. Returns (path,
    None) or (None, reason)."""
    given = os.environ.get("NIMBLE_ORT_CAPI")
    if given:
        return (given, None) if os.access(given, os.X_OK) else (None, "NIMBLE_ORT_CAPI=%s is not executable" % given)
    src = os.path.join(HERE, "ort_capi.c")
    out = os.path.join(cache, "bin", "ort_capi")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return out, None
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-o", out + ".tmp", src,
           "-ldl"]
    log("ort_capi: " + " ".join(cmd))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, "cannot build ort_capi: %s" % e
    if r.returncode != 0:
        return None, "building ort_capi failed: %s" % ((r.stdout.strip() or "no message").splitlines()[0])
    os.replace(out + ".tmp", out)
    return out, None


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


def cpu_busy_ticks():
    """(busy, total) jiffies of all CPUs from /proc/stat, or None."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def settle(max_s=0.3):
    """Waits, up to max_s, until the CPUs are idle: a peer's threads may
    still spin after its turn (ONNX Runtime's intra-op pool spins after a
    Run by default), and the next framework's threads would share cores
    with them. Returns the seconds waited."""
    t0 = time.perf_counter()
    prev = cpu_busy_ticks()
    if prev is None:
        return 0.0
    while time.perf_counter() - t0 < max_s:
        time.sleep(0.02)
        cur = cpu_busy_ticks()
        busy, total = cur[0] - prev[0], cur[1] - prev[1]
        prev = cur
        if total > 0 and busy <= 0.1 * total:
            break
    return time.perf_counter() - t0


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


# --- peers -------------------------------------------------------------------

def cpus_for(threads):
    """The CPUs a framework at `threads` threads runs on: the first `threads`
    of the harness's own (all of them when it has no more). On this
    machine's two vCPUs the same binary ran squeezenet1_0 8.5-8.9 ms on
    one and 10.9-11.2 on the other in the same minutes (ORT-C 8.9 and
    9.9): a long-lived peer and a fresh nimble-run landing on different
    cores made ratios that measured the cores. At one thread every
    framework now runs on the same core, interleaved as before."""
    allowed = sorted(os.sched_getaffinity(0))
    return set(allowed[:threads]) if 0 < threads < len(allowed) else set(allowed)


def pinned(threads):
    """A preexec_fn for subprocess: the child runs on cpus_for(threads)."""
    cpus = cpus_for(threads)
    return lambda: os.sched_setaffinity(0, cpus)


class Worker:
    """A peer in its own process, speaking one JSON line each way."""

    def __init__(self, name, argv, log_path, threads):
        self.name = name
        self.dead = None
        self.log_path = log_path
        self.errlog = open(log_path, "w")
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.errlog, text=True, bufsize=1, preexec_fn=pinned(threads))
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
       (compiled once per model, run at every thread count)
       nimble-run prints the median and minimum of its N runs."""

    LATENCY = re.compile(r"median ([0-9.]+) ms, min ([0-9.]+) ms")

    def __init__(self, build, cache):
        self.cli = os.environ.get("NIMBLE_BIN") or os.path.join(build, "client", "nimble")
        self.runner = os.environ.get("NIMBLE_RUN_BIN") or os.path.join(build, "runtime", "tools", "nimble-run")
        self.dir = os.path.join(cache, "nimble")
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

    def compile_tuned(self, model, source, sizes, threads, budget_s):
        """`nimble compile --option tune=true` for one model, measured at
        every configuration's input shapes at once (`sizes`: a list of
        [(name, shape), ...], at most 4; tune_inputs' '|'-separated sizes)
        and `threads` threads (docs/tuning.md), with the model's warm kernel
        cache: one artifact serves all of the model's configurations, as
        for a user. Returns (path, (seconds, summary)) or (None, reason)."""
        if self.reason:
            return None, self.reason
        tdir = os.path.join(self.dir, "tuned")
        os.makedirs(tdir, exist_ok=True)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", model)
        out = os.path.join(tdir, safe + ".nimble")
        if os.path.exists(out):
            os.unlink(out)
        dims = "|".join(";".join("%s=%s" % (n, "x".join(str(d) for d in shape)) for n, shape in shapes)
                        for shapes in sizes[:4])
        cmd = [self.cli, "compile", source, "--target=x86", "-o", out, "--option", "tune=true",
               "--option", "tune_threads=%d" % threads, "--option", "tune_budget_s=%d" % budget_s,
               "--option", "tune_inputs=" + dims, "--tune-records-out", os.path.join(tdir, safe + ".records.json")]
        env = dict(os.environ, NIMBLE_KERNEL_CACHE=os.path.join(self.dir, "kernel-cache", model))
        log("nimble: " + " ".join(cmd))
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=600 + 2 * budget_s, env=env)
        except subprocess.TimeoutExpired:
            return None, "tuned compile ran over %d s" % (600 + 2 * budget_s)
        secs = time.perf_counter() - t0
        if r.returncode != 0 or not os.path.exists(out):
            return None, "tuned compile failed: %s" % (r.stderr.strip() or "no message").splitlines()[0]
        summary = [ln for ln in r.stderr.splitlines() if ln.startswith("tuned: ")]
        # "17 new records (...), 12 took a schedule of their own (7 of them
        # one per output size)": records are per workload signature.
        line = summary[0] if summary else ""
        m = re.search(r"(\d+) took a schedule of their own", line)
        n = re.search(r"(\d+) new records", line)
        b = re.search(r"\((\d+) of them one per output size\)", line)
        return out, (secs, "%s of %s%s" % (m.group(1) if m else "?", n.group(1) if n else "?",
                                          ", %s by size" % b.group(1) if b else ""))

    def run(self, exe, inputs, repeat, threads, outdir, warmup=0):
        """Returns ((median_ms, min_ms), None) or (None, reason). `warmup`
        untimed runs come first (nimble-run --warmup)."""
        os.makedirs(outdir, exist_ok=True)
        cmd = [self.runner, exe]
        for name, path in inputs.items():
            cmd += ["--input", "%s=%s" % (name, path)]
        cmd += ["--repeat", str(repeat), "--warmup", str(warmup), "--threads", str(threads), "--output-dir", outdir]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600,
                               preexec_fn=pinned(threads))
        except subprocess.TimeoutExpired:
            return None, "nimble-run ran over 600 s"
        if r.returncode != 0:
            return None, "run failed: %s" % ((r.stderr.strip() or "no message").splitlines()[0])
        m = self.LATENCY.search(r.stdout)
        if not m:
            return None, "nimble-run printed no latency line"
        return (float(m.group(1)), float(m.group(2))), None


# --- measurement ---------------------------------------------------------------

# Untimed runs before each nimble-run batch, about this many ms of them. The
# peers run in long-lived workers whose threads have long settled on their
# cores; a fresh nimble-run's pool worker can start on its caller's core and
# is moved within 10-20 ms (cnn at 2 threads measured 0.12-0.13 or
# 0.18-0.23 ms per batch with one warm-up run, 0.12-0.13 with 20 ms of them).
WARMUP_MS = 25.0
# At more than one thread the VM measures its first invokes to choose how
# its kernels use the pool (docs/vm.md, "Threads by measurement"): from
# 40 ms after it is created, 21 invokes. The warm-up covers them, as a
# long-lived process has them behind it.
PROBE_AFTER_MS = 45.0
PROBE_INVOKES = 22


def warmup_runs(median_ms, threads=1):
    """nimble-run --warmup for a batch whose runs take about median_ms
    (None before the first batch: 5, or enough for the probe) at `threads`."""
    if threads > 1:
        if not median_ms:
            return 5 + PROBE_INVOKES
        return min(100000, int(math.ceil(PROBE_AFTER_MS / max(median_ms, 1e-3))) + PROBE_INVOKES)
    if not median_ms:
        return 5
    return max(1, min(1000, int(math.ceil(WARMUP_MS / max(median_ms, 1e-3)))))


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


# The peers, in the report's order. "ortc" is ONNX Runtime through its C API
# (ort_capi), the column Nimble is held to; "ortnode" the same library through
# node's onnxruntime-node, kept beside it to show the binding's overhead.
PEERS = ["ortc", "ortnode", "torch", "nimble", "nimbletuned"]
NAMES = {"ortc": "ORT-C", "ortnode": "ORT-node", "torch": "PyTorch", "nimble": "Nimble", "nimbletuned": "Nimble tuned"}


def parse_threads(text):
    try:
        ts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        ts = []
    if not ts or any(t < 1 or t > 64 for t in ts) or len(set(ts)) != len(ts):
        raise argparse.ArgumentTypeError("'%s': give distinct thread counts from 1 to 64, e.g. 1,2" % text)
    return ts


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(prog="bench/models/run.sh", description="Nimble vs ONNX Runtime vs PyTorch: model latency.")
    ap.add_argument("--threads", type=parse_threads, default=[1, 2],
                    help="comma-separated thread counts, each measured in the same interleaved run (default 1,2)")
    ap.add_argument("--repeat", type=int, default=60,
                    help="timed runs per configuration, thread count and framework, over all rounds (default 60)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--max-batch-s", type=float, default=1.0,
                    help="a framework's turn stops after this many seconds (at least 3 runs)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: " + ",".join(MODELS))
    ap.add_argument("--out", default=None, help="also write the Markdown report here")
    ap.add_argument("--build", default=os.path.join(REPO, "build"), help="Nimble build folder (default build/)")
    ap.add_argument("--cache", default=os.environ.get("NIMBLE_BENCH_CACHE", os.path.join(HERE, ".cache")))
    ap.add_argument("--openblas-coretype", default=None, metavar="NAME",
                    help="set OPENBLAS_CORETYPE for the measured frameworks (default: leave the environment as is)")
    ap.add_argument("--tune-budget-s", type=int, default=40,
                    help="seconds of `nimble compile --option tune=true` per model for the tuned column; "
                         "0: no tuned column (default 40: half of it compiles the 14 schedule points of mobilenet_v2)")
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
    if not 0 <= a.tune_budget_s <= 3600:
        ap.error("--tune-budget-s must be from 0 to 3600")
    if a.tune_budget_s == 0:
        PEERS.remove("nimbletuned")
    threads = a.threads
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

    # One long-lived worker per peer and thread count (a process's thread
    # pools are fixed when it starts).
    ort_mod, ort_reason = install_ort(cache)
    ort_lib, lib_reason = ort_library(ort_mod) if ort_mod else (None, ort_reason)
    capi, capi_reason = build_ort_capi(cache) if ort_lib else (None, lib_reason)
    workers, why_none = {}, {}
    for t in threads:
        if ort_mod:
            workers[("ortnode", t)] = Worker("ort-node", ["node", os.path.join(HERE, "ort_worker.js"), ort_mod, str(t)],
                                             os.path.join(cache, "ort_worker.t%d.log" % t), t)
        else:
            why_none["ortnode"] = ort_reason
        if capi:
            workers[("ortc", t)] = Worker("ort-c", [capi, "--lib", ort_lib, "--threads", str(t), "--serve"],
                                          os.path.join(cache, "ort_capi.t%d.log" % t), t)
        else:
            why_none["ortc"] = capi_reason
        workers[("torch", t)] = Worker("torch", [sys.executable, os.path.join(HERE, "torch_worker.py"), REPO, str(t)],
                                       os.path.join(cache, "torch_worker.t%d.log" % t), t)
    nimble = Nimble(os.path.abspath(a.build), cache)

    t0 = threads[0]
    info = {}
    for peer in ("ortc", "ortnode", "torch"):
        w = workers.get((peer, t0))
        info[peer] = w.call(cmd="info") if w else {"ok": False, "error": why_none.get(peer)}
        if not info[peer].get("ok"):
            log("%s worker: %s" % (NAMES[peer], info[peer].get("error")))

    # Load every configuration on every framework at every thread count;
    # record why one cannot run.
    cells = {}
    tuned = {}  # model -> (path, (seconds, "k of n kernels")) or (None, reason)
    safe = lambda label: re.sub(r"[^A-Za-z0-9_.-]+", "_", label)  # noqa: E731
    out_file = lambda peer, t, label: os.path.join(outputs, peer, "t%d" % t, safe(label) + ".npy")  # noqa: E731
    out_dir = lambda peer, t, label: os.path.join(outputs, peer, "t%d" % t, safe(label))  # noqa: E731
    for t in threads:
        for peer in PEERS:
            os.makedirs(os.path.join(outputs, peer, "t%d" % t), exist_ok=True)
    for label, model, spec in configs:
        if model == "treelstm":
            source = os.path.join(REPO, "examples", "treelstm.nir")
        else:
            source = os.path.join(models_dir, model + ".onnx")
        exe, secs = nimble.compile(model, source)  # timed, once per model
        for t in threads:
            row = cells[(label, t)] = {}
            log("loading %s at %d thread(s)" % (label, t))
            for peer in ("ortc", "ortnode"):
                w = workers.get((peer, t))
                if model == "treelstm":
                    row[peer] = Cell("no ONNX model: recursion over a tree")
                elif not w:
                    row[peer] = Cell(why_none.get(peer))
                else:
                    r = w.call(cmd="load", id=label, model=os.path.join(models_dir, model + ".onnx"),
                               inputs=inputs[label], out=out_file(peer, t, label))
                    row[peer] = Cell(None if r.get("ok") else r.get("error"))
            w = workers[("torch", t)]
            if model == "treelstm":
                r = w.call(cmd="load", id=label, model="treelstm", trees=os.path.join(models_dir, "treelstm.json"))
            else:
                r = w.call(cmd="load", id=label, model=model, inputs=inputs[label],
                           out=out_file("torch", t, label))
            row["torch"] = Cell(None if r.get("ok") else r.get("error"))
            if "nimbletuned" in PEERS and model == "treelstm":
                row["nimbletuned"] = Cell("tree inputs: tuning makes random tensors only")
            elif "nimbletuned" in PEERS:
                if model not in tuned:
                    # Every configuration of the model (its sizes), tuned in
                    # one compile. A value (loop_if's n) is a 0-d tensor: no
                    # dims.
                    sizes = [[(name, shape if isinstance(shape, tuple) else ()) for name, _, shape in spec2]
                             for _, model2, spec2 in configs if model2 == model]
                    tuned[model] = nimble.compile_tuned(model, source, sizes, max(threads), a.tune_budget_s)
                texe, tinfo = tuned[model]
                row["nimbletuned"] = Cell(None if texe else tinfo)
                row["nimbletuned"].exe = texe
                row["nimbletuned"].compile_s = tinfo if texe else None
            if exe is None:
                row["nimble"] = Cell(secs)
            else:
                row["nimble"] = Cell()
                row["nimble"].compile_s = secs
                row["nimble"].exe = exe
                if model == "treelstm":
                    row["nimble"].trees = write_tree_inputs(cache, models_dir)
            for peer in PEERS:
                if not row[peer].ok():
                    log("  %s: %s" % (NAMES[peer], row[peer].reason))

    # Interleaved rounds: every configuration, at every thread count, on
    # every framework in turn; the frameworks' order rotates per round.
    per_round = max(1, math.ceil(a.repeat / a.rounds))
    settle_s = []  # waits for idle CPUs before each turn
    t_measure = time.perf_counter()
    for rnd in range(a.rounds):
        order = PEERS[rnd % len(PEERS):] + PEERS[: rnd % len(PEERS)]
        log("round %d/%d" % (rnd + 1, a.rounds))
        for label, model, spec in configs:
            runs = per_round
            if model == "treelstm":  # whole passes over the trees, so every tree counts alike
                runs = TREES_PER_PASS * max(1, math.ceil(per_round / TREES_PER_PASS))
            for t in threads:
                row = cells[(label, t)]
                for peer in order:
                    cell = row[peer]
                    if not cell.ok():
                        continue
                    settle_s.append(settle())
                    if peer == "nimble" and model == "treelstm":
                        # One nimble-run per tree (it runs one input set), n
                        # runs each: a batch's median is that tree's; the
                        # cell's median is over trees and rounds, like
                        # PyTorch's over its runs.
                        trees = cell.trees
                        n = max(3, runs // len(trees))
                        med = cell.median()
                        if med:
                            n = max(3, min(n, int(2 * a.max_batch_s * 1000 / len(trees) / max(med, 1e-3))))
                        for i, tree_inputs in enumerate(trees):
                            res, why = nimble.run(cell.exe, tree_inputs, n, t,
                                                  os.path.join(out_dir("nimble", t, label), "tree%02d" % i),
                                                  warmup_runs(med, t))
                            if why:
                                cell.reason = "tree %d: %s" % (i, why)
                                break
                            cell.batches.append(res + (n,))
                        continue
                    if peer in ("nimble", "nimbletuned"):
                        n = runs
                        med = cell.median()
                        if med:  # nimble-run cannot stop on time; size the batch from earlier ones
                            n = max(3, min(runs, int(a.max_batch_s * 1000 / max(med, 1e-3))))
                        # Before a first batch at this thread count, the
                        # latency at another one sizes the warm-up.
                        est = med or next((cells[(label, u)][peer].median() for u in threads
                                           if u != t and cells[(label, u)][peer].median()), None)
                        res, why = nimble.run(cell.exe, inputs[label], n, t, out_dir(peer, t, label),
                                              warmup_runs(est, t))
                        if why:
                            cell.reason = why
                        else:
                            cell.batches.append(res + (n,))
                        continue
                    r = workers[(peer, t)].call(cmd="time", id=label, warmup=1, runs=runs,
                                                max_s=a.max_batch_s * (2 if model == "treelstm" else 1))
                    if r.get("ok"):
                        cell.samples.extend(r["times_ms"])
                    else:
                        cell.reason = r.get("error")
    measure_s = time.perf_counter() - t_measure
    for w in workers.values():
        w.close()

    # Output agreement (first output), each framework against PyTorch.
    checks = {}
    for label, model, spec in configs:
        for t in threads:
            row = cells[(label, t)]
            if model == "treelstm":
                notes = ["PyTorch root h = stored reference" if row["torch"].ok() else "PyTorch —"]
                if row["nimble"].ok():
                    notes.append(check_trees(models_dir, out_dir("nimble", t, label)))
                checks[(label, t)] = "; ".join(notes)
                continue
            ref = out_file("torch", t, label)
            notes = []
            for peer in ("ortc", "ortnode", "nimble", "nimbletuned"):
                if peer not in row or not row[peer].ok() or not row["torch"].ok():
                    continue
                if peer in ("nimble", "nimbletuned"):
                    with open(os.path.join(models_dir, model + ".json")) as f:
                        first = json.load(f)["outputs"][0]["name"]
                    # nimble-run names files after the model's outputs
                    got = os.path.join(out_dir(peer, t, label), first + ".npy")
                else:
                    got = out_file(peer, t, label)
                if not os.path.exists(got):
                    notes.append("%s: no output file" % NAMES[peer])
                    continue
                agree, diff = compare(models_dir, model, got, ref)
                notes.append("%s %s (%s)" % (NAMES[peer], "yes" if agree else "NO",
                                             diff if isinstance(diff, str) else "%.0e" % diff))
            checks[(label, t)] = "; ".join(notes) if notes else "—"

    # Report.
    mi = machine_info()
    t_info = info["torch"]
    tuning = "nimbletuned" in PEERS
    lines = []
    lines.append("Run %s UTC, %.0f s of interleaved measurement." % (started.strftime("%Y-%m-%d %H:%M"), measure_s))
    lines.append("")
    lines.append("- command: `%s`" % (a.command or " ".join(shlex.quote(x) for x in sys.argv)))
    lines.append("- machine: %s, %s cores, %s, Linux %s; load average %s at the start, %s at the end"
                 % (mi.get("cpu"), mi.get("cores"), mi.get("memory", "?"), mi.get("kernel"), load_start, loadavg()))
    lines.append("- threads: %s, interleaved in one run. At N threads: both ORT columns intra-op N / inter-op 1, "
                 "sequential execution; PyTorch set_num_threads(N), OMP/MKL/OPENBLAS_NUM_THREADS=N; "
                 "nimble-run --threads N; every framework's process at N threads runs on the same CPUs: %s"
                 % (", ".join(str(t) for t in threads),
                    "; ".join("%d thread%s: CPU %s" % (t, "" if t == 1 else "s",
                                                        ",".join(str(c) for c in sorted(cpus_for(t))))
                              for t in threads)))
    lines.append("- OpenBLAS (PyTorch's BLAS): OPENBLAS_CORETYPE=%s, OPENBLAS_L2_SIZE=%s, kernels in use: %s; "
                 "OMP_WAIT_POLICY=%s"
                 % (os.environ.get("OPENBLAS_CORETYPE", "(unset)"), os.environ.get("OPENBLAS_L2_SIZE", "(unset)"),
                    t_info.get("openblas_core", "?"), t_info.get("omp_wait_policy", "?")))

    def version(peer):
        i = info[peer]
        return i.get("version") if i.get("ok") else "n/a (%s)" % cell_text(i.get("error"), 200)

    lines.append("- **ORT-C** (the column that counts): ONNX Runtime %s through its C API, `bench/models/ort_capi` "
                 "(dlopen of the npm package's `libonnxruntime.so.1`, one `OrtApi::Run` per timed run). "
                 "**ORT-node**: the same library through node's onnxruntime-node %s (`await session.run()`), kept "
                 "beside it to show the binding's overhead. Both: CPU execution provider with ORT's default MLAS "
                 "kernels, all graph optimizations (ORT_ENABLE_ALL)." % (version("ortc"), version("ortnode")))
    lines.append("- PyTorch %s eager (Debian)" % version("torch"))
    if tuning:
        lines.append("- **Nimble tuned**: `nimble compile --option tune=true` once per model on this machine, "
                     "measured at all of the model's configurations at once (tune_inputs = their shapes, "
                     "'|'-separated; tune_threads = %d, tune_budget_s = %d; docs/tuning.md), so one artifact serves "
                     "every size of a model, as for a user; run like Nimble; its compile time (search included), "
                     "the workload signatures whose schedule the search changed of those it recorded, and how many "
                     "of them got a schedule per output size, are in the tuning column" %
                     (max(threads), a.tune_budget_s))
    lines.append("- method: %d rounds; in each, every configuration runs at every thread count on each framework in "
                 "turn (order rotating per round), 1 untimed run then up to %d timed runs or %.1f s (Nimble: "
                 "a fresh nimble-run per turn, about %d ms of untimed runs first, for its pool's threads to "
                 "settle as the peers' long-lived workers' have; at more than one thread %d ms plus %d runs, "
                 "past the VM's probe of how its kernels use the threads, docs/vm.md); "
                 "median and min over all timed runs (Nimble: median of nimble-run's per-round medians, "
                 "min of its minimums). Before each turn the harness waits until the CPUs are idle (at most "
                 "0.3 s; here median %.0f ms, max %.0f ms): ONNX Runtime's threads spin on after a Run, and the next "
                 "framework would share its cores with them. Latency in ms."
                 % (a.rounds, per_round, a.max_batch_s, WARMUP_MS, PROBE_AFTER_MS, PROBE_INVOKES,
                    1000 * (sorted(settle_s)[len(settle_s) // 2] if settle_s else 0),
                    1000 * max(settle_s or [0])))
    core = t_info.get("openblas_core", "")
    if core.lower() in ("prescott", "generic", "core2", "katmai", "northwood", "banias"):
        lines.append("- **note**: OpenBLAS runs its %s (pre-AVX) fallback kernels on this CPU, so PyTorch's "
                     "matrix products are far slower than they need be; `--openblas-coretype` picks a kernel set "
                     "(e.g. Haswell for AVX2, SkylakeX for AVX-512)" % core)
    reasons = {}

    def na(cell):
        short = cell_text(cell.reason, 60)
        if short != " ".join(str(cell.reason).split()):
            reasons.setdefault(short, cell.reason)
        return "n/a (%s)" % short

    hdr = ["config", "Nimble median", "Nimble min", "ORT-C median", "ORT-C min", "ORT-node median",
           "PyTorch median", "**Nimble/ORT-C**", "Nimble/ORT-node", "Nimble/PyTorch", "Nimble compile cold/warm (s)",
           "runs " + "/".join({"ortc": "C", "ortnode": "node", "torch": "PT", "nimble": "Nimble",
                               "nimbletuned": "tuned"}[p] for p in PEERS), "first output vs PyTorch"]
    if tuning:
        hdr[3:3] = ["Nimble tuned median", "**tuned/ORT-C**", "tuning s (signatures re-scheduled)"]
    summary = []
    for t in threads:
        lines.append("")
        lines.append("### %d thread%s" % (t, "" if t == 1 else "s"))
        lines.append("")
        lines.append("| " + " | ".join(hdr) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 2) + ["---"]) + "|")
        seen_models = set()
        ratios, tratios = [], []
        for label, model, spec in configs:
            row = cells[(label, t)]
            n = row["nimble"]
            have = lambda c: c.ok() and c.runs()  # noqa: E731
            cols = [label]
            cols += [fmt_ms(n.median()), fmt_ms(n.minimum())] if have(n) else [na(n) if n.reason else "—", "—"]
            c = row["ortc"]
            if tuning:
                tc = row["nimbletuned"]
                cols.append(fmt_ms(tc.median()) if have(tc) else (na(tc) if tc.reason else "—"))
                if have(tc) and have(c):
                    tratios.append(tc.median() / c.median())
                    cols.append("**%.2fx**" % tratios[-1])
                else:
                    cols.append("—")
                cols.append("%.1f (%s)" % tc.compile_s if tc.compile_s else "—")
            cols += [fmt_ms(c.median()), fmt_ms(c.minimum())] if have(c) else [na(c) if c.reason else "—", "—"]
            for peer in ("ortnode", "torch"):
                p = row[peer]
                cols.append(fmt_ms(p.median()) if have(p) else (na(p) if p.reason else "—"))
            for peer in ("ortc", "ortnode", "torch"):
                p = row[peer]
                if have(n) and have(p):
                    r = n.median() / p.median()
                    cols.append(("**%.2fx**" if peer == "ortc" else "%.2fx") % r)
                    if peer == "ortc":
                        ratios.append(r)
                else:
                    cols.append("—")
            if model in seen_models:
                cols.append("″")
            elif n.compile_s is not None:
                cols.append("%.2f / %.2f" % n.compile_s)
            else:
                cols.append(na(n) if n.reason else "—")
            seen_models.add(model)
            cols.append("/".join(str(row[p].runs()) if row[p].ok() else "0" for p in PEERS))
            cols.append(cell_text(checks.get((label, t), "—"), 110))
            lines.append("| " + " | ".join(cols) + " |")
        if ratios:
            summary.append("%d thread%s: Nimble faster than ORT-C on %d of %d configurations, geometric mean of "
                           "Nimble/ORT-C %.2fx, worst %.2fx"
                           % (t, "" if t == 1 else "s", sum(r < 1 for r in ratios), len(ratios), geomean(ratios),
                              max(ratios)))
        if tratios:
            summary.append("%d thread%s, tuned: faster than ORT-C on %d of %d configurations, geometric mean of "
                           "tuned/ORT-C %.2fx, worst %.2fx"
                           % (t, "" if t == 1 else "s", sum(r < 1 for r in tratios), len(tratios), geomean(tratios),
                              max(tratios)))
    lines.append("")
    lines.append("Ratios are Nimble's median over the peer's (below 1: Nimble is faster); Nimble/ORT-C is the one "
                 "that counts. Tree-LSTM: one timed run is one tree (20 trees of 20–40 leaves, in turn); Nimble runs "
                 "each tree with its own nimble-run (JSON tree input), and its median is over the per-tree medians.")
    if summary:
        lines.append("")
        for line in summary:
            lines.append("- " + line)
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
