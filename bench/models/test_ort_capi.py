#!/usr/bin/python3
"""ort_capi (the model benchmark's ONNX Runtime C API peer) computes what it
should.

    test_ort_capi.py --ort-capi BUILD/bench/models/ort_capi
                     --models-dir BUILD/models --ort-dir NODE_MODULES

Checks, against values ort_capi did not make:
  1. every case of every reference ONNX model (scripts/gen_reference_models.py:
     inputs and outputs as PyTorch computed them), through the worker
     protocol bench.py speaks, at 1 thread: every output within the model's
     tolerance; bert_tiny and mobilenet_v2 again at 2 threads;
  2. the one-shot mode: its per-run lines and its median/min line agree,
     and the outputs it writes match PyTorch's;
  3. where node is installed: onnxruntime-node (ort_worker.js, the same
     library) gives the same first output for every model's case 0;
  4. the error paths: an unknown input name, a missing input, a missing
     model file, an unloaded id, a malformed command, an unknown command, a
     library that does not exist; each answers a message naming the thing.
Exits 77 with a "skipped: ..." line when libonnxruntime.so.1 is absent
(bench/models/run.sh installs onnxruntime-node; $NIMBLE_ORT_LIB names one).
"""
import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def find_lib(ort_dir):
    lib = os.environ.get("NIMBLE_ORT_LIB")
    if lib:
        return lib if os.path.exists(lib) else None
    arch = {"x86_64": "x64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    hits = sorted(glob.glob(os.path.join(ort_dir, "onnxruntime-node", "bin", "napi-v*", "linux", arch,
                                         "libonnxruntime.so.1")))
    return hits[-1] if hits else None


class Worker:
    def __init__(self, argv):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, bufsize=1)

    def call(self, **cmd):
        return self.raw(json.dumps(cmd))

    def raw(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline()
        if not reply:
            self.proc.wait()
            sys.exit("FAIL: worker %s exited (status %s): %s"
                     % (self.proc.args[0], self.proc.returncode, self.proc.stderr.read().strip()[-500:]))
        return json.loads(reply)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        return self.proc.returncode


def compare(got_path, want_path, tol):
    """(agree, description)"""
    if not os.path.exists(got_path):
        return False, "no file %s" % got_path
    got, want = np.load(got_path), np.load(want_path)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False, "%s %s, expected %s %s" % (got.dtype, got.shape, want.dtype, want.shape)
    diff = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) if got.size else 0.0
    return bool(np.allclose(got, want, rtol=tol["rtol"], atol=tol["atol"])), "max diff %.1e" % diff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-capi", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--ort-dir", required=True)
    a = ap.parse_args()
    lib = find_lib(a.ort_dir)
    if not lib:
        if os.environ.get("NIMBLE_ORT_LIB"):
            print("skipped: NIMBLE_ORT_LIB=%s does not exist" % os.environ["NIMBLE_ORT_LIB"])
        else:
            print("skipped: no libonnxruntime.so.1 under %s (bench/models/run.sh installs onnxruntime-node "
                  "there; or set NIMBLE_ORT_LIB)" % a.ort_dir)
        return 77
    lib = os.path.abspath(lib)
    models = []
    for path in sorted(glob.glob(os.path.join(a.models_dir, "*.json"))):
        with open(path) as f:
            meta = json.load(f)
        if meta.get("file", "").endswith(".onnx"):
            models.append(meta)
    if not models:
        print("FAIL: no reference ONNX models in %s" % a.models_dir)
        return 1
    tmp = tempfile.mkdtemp(prefix="ort_capi_test.")
    try:
        run_checks(a, lib, models, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def case_inputs(models_dir, case):
    return {name: os.path.join(models_dir, spec["file"]) for name, spec in case["inputs"].items()}


def run_checks(a, lib, models, tmp):
    md = a.models_dir
    # 1. Every case of every model, worker protocol, 1 thread; two models at 2.
    for threads, only in ((1, None), (2, ("bert_tiny", "mobilenet_v2"))):
        w = Worker([a.ort_capi, "--lib", lib, "--threads", str(threads), "--serve"])
        info = w.call(cmd="info")
        check(info.get("ok") and re.fullmatch(r"\d+\.\d+\.\d+", info.get("version", "")) and
              info.get("threads") == threads and info.get("lib") == lib,
              "info at %d thread(s) names the version, threads and library: %s" % (threads, info))
        for meta in models:
            if only and meta["name"] not in only:
                continue
            for case in meta["cases"]:
                cid = "%s/%s" % (meta["name"], case["id"])
                outdir = os.path.join(tmp, "t%d" % threads, meta["name"], str(case["id"]))
                os.makedirs(os.path.dirname(outdir), exist_ok=True)
                first = os.path.join(tmp, "first.npy")
                r = w.call(cmd="load", id=cid, model=os.path.join(md, meta["file"]),
                           inputs=case_inputs(md, case), out=first, outdir=outdir)
                if not r.get("ok"):
                    check(False, "%s at %d thread(s) loads: %s" % (cid, threads, r.get("error")))
                    continue
                for name, spec in case["outputs"].items():
                    ok, why = compare(os.path.join(outdir, name + ".npy"), os.path.join(md, spec["file"]),
                                      meta["tolerance"])
                    check(ok, "%s output '%s' at %d thread(s) matches PyTorch (%s)" % (cid, name, threads, why))
                first_name = meta["outputs"][0]["name"]
                ok, why = compare(first, os.path.join(md, case["outputs"][first_name]["file"]), meta["tolerance"])
                check(ok, "%s: \"out\" holds the first output '%s' (%s)" % (cid, first_name, why))
                t = w.call(cmd="time", id=cid, warmup=1, runs=4, max_s=10)
                check(t.get("ok") and len(t.get("times_ms", [])) == 4 and all(x > 0 for x in t["times_ms"]),
                      "%s: time answers 4 positive run times" % cid)
        check(w.close() == 0, "the worker exits 0 at the end of its input")

    # 2. One shot: per-run lines, the summary, the outputs.
    meta = next(m for m in models if m["name"] == "lstm")
    case = meta["cases"][-1]
    outdir = os.path.join(tmp, "oneshot")
    argv = [a.ort_capi, "--lib", lib, "--model", os.path.join(md, meta["file"]), "--warmup", "2", "--repeat", "7",
            "--output-dir", outdir]
    for name, path in case_inputs(md, case).items():
        argv += ["--input", "%s=%s" % (name, path)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs = [float(x) for x in re.findall(r"^run \d+: ([0-9.]+) ms$", r.stdout, re.M)]
    summary = re.search(r"7 runs, median ([0-9.]+) ms, min ([0-9.]+) ms", r.stdout)
    check(r.returncode == 0 and len(runs) == 7 and summary is not None,
          "one shot prints 7 run lines and a summary (exit %d)%s"
          % (r.returncode, "" if r.returncode == 0 else ": " + (r.stdout + r.stderr)[-300:]))
    if len(runs) == 7 and summary:
        med, mn = float(summary.group(1)), float(summary.group(2))
        check(abs(med - float(np.median(runs))) < 1e-3 and abs(mn - min(runs)) < 1e-3,
              "one shot's median %.4f and min %.4f are those of its run lines" % (med, mn))
    for name, spec in case["outputs"].items():
        ok, why = compare(os.path.join(outdir, name + ".npy"), os.path.join(md, spec["file"]), meta["tolerance"])
        check(ok, "one shot writes output '%s' matching PyTorch (%s)" % (name, why))

    # 3. Against onnxruntime-node: same library, same session options.
    node = shutil.which("node")
    mod = os.path.abspath(os.path.join(a.ort_dir, "onnxruntime-node"))
    if node and os.path.exists(os.path.join(mod, "package.json")) and not os.environ.get("NIMBLE_ORT_LIB"):
        wn = Worker([node, os.path.join(HERE, "ort_worker.js"), mod, "1"])
        wc = Worker([a.ort_capi, "--lib", lib, "--threads", "1", "--serve"])
        for meta in models:
            case = meta["cases"][0]
            paths = {}
            for tag, w in (("node", wn), ("c", wc)):
                paths[tag] = os.path.join(tmp, "%s.%s.npy" % (meta["name"], tag))
                r = w.call(cmd="load", id=meta["name"], model=os.path.join(md, meta["file"]),
                           inputs=case_inputs(md, case), out=paths[tag])
                check(r.get("ok"), "%s loads in the %s worker (%s)" % (meta["name"], tag, r.get("error", "")))
            ok, why = compare(paths["c"], paths["node"], meta["tolerance"])
            check(ok, "%s: ort_capi's first output matches onnxruntime-node's (%s)" % (meta["name"], why))
        wn.close()
        wc.close()
    else:
        print("note: onnxruntime-node comparison not run (node or %s absent, or NIMBLE_ORT_LIB set)" % mod)

    # 4. Error paths.
    w = Worker([a.ort_capi, "--lib", lib, "--serve"])
    mlp = next(m for m in models if m["name"] == "mlp")
    mlp_model = os.path.join(md, mlp["file"])
    x = case_inputs(md, mlp["cases"][0])["x"]
    r = w.call(cmd="load", id="e1", model=mlp_model, inputs={"q": x})
    check(not r["ok"] and "no input 'q'" in r["error"] and "'x'" in r["error"],
          "an unknown input name is named, with the model's inputs: %s" % r.get("error"))
    r = w.call(cmd="load", id="e2", model=mlp_model, inputs={})
    check(not r["ok"] and "no file for input 'x'" in r["error"], "a missing input is named: %s" % r.get("error"))
    r = w.call(cmd="load", id="e3", model=os.path.join(tmp, "absent.onnx"), inputs={})
    check(not r["ok"] and "absent.onnx" in r["error"], "a missing model file is named: %s" % r.get("error"))
    r = w.call(cmd="load", id="e4", model=mlp_model, inputs={"x": os.path.join(md, mlp["file"])})
    check(not r["ok"] and "input 'x'" in r["error"] and "not a .npy file" in r["error"],
          "an input that is not .npy is named: %s" % r.get("error"))
    r = w.call(cmd="time", id="e1")
    check(not r["ok"] and "'e1' is not loaded" in r["error"], "timing an id that failed to load: %s" % r.get("error"))
    r = w.raw('{"cmd": "load", "id": ')
    check(not r["ok"] and r["error"], "a malformed line answers an error: %s" % r.get("error"))
    r = w.call(cmd="fly")
    check(not r["ok"] and "unknown command 'fly'" in r["error"], "an unknown command is named: %s" % r.get("error"))
    r = w.call(cmd="load", id="ok", model=mlp_model, inputs={"x": x})
    check(r.get("ok"), "the worker carries on after errors")
    check(w.close() == 0, "the worker exits 0 after errors")
    r = subprocess.run([a.ort_capi, "--lib", os.path.join(tmp, "libnothing.so"), "--version"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(r.returncode == 1 and "libnothing.so" in r.stderr, "a missing library is named: %s" % r.stderr.strip())
    r = subprocess.run([a.ort_capi, "--lib", lib, "--threads", "0", "--version"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(r.returncode == 2 and "--threads" in r.stderr, "--threads 0 is refused: %s" % r.stderr.strip())


if __name__ == "__main__":
    sys.exit(main())
