#!/usr/bin/python3
"""Shows that run_real_models.py can fail, and says why when it does.

    check_runner.py MODELS_DIR WORK_DIR

Runs the runner on models of the generated corpus (MODELS_DIR, from
scripts/gen_real_models.py) with fake `nimble` and `nimble-run` tools
written into WORK_DIR. The fake compiler records which model it was given;
the fake runtime copies PyTorch's expected outputs for the case its inputs
come from, then spoils them one way at a time (FAKE_MODE): a float off by
0.1%, an int64 off by one, a bool output written as uint8, a NaN, a wrong
shape, a missing file, a crash. Each must fail the model with the problem
named; exact outputs (also under nimble-run's output_<i> fallback names)
must pass; and the known-failures list must be enforced both ways.
"""
import json
import os
import shutil
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "run_real_models.py")

FAKE_NIMBLE = r'''#!PYTHON
import os, sys
mode = os.environ.get("FAKE_MODE", "")
args = sys.argv[1:]
assert args[0] == "compile", args
src, out = args[1], args[args.index("-o") + 1]
assert args[2] in ("--target=x86", "--target=aarch64"), args
if mode == "compile_error":
    sys.stderr.write("nimble: compiling %s (import): node 'x' (Mystery): operator 'Mystery' is not supported\n"
                     "second line that must not be reported\n" % os.path.basename(src))
    sys.exit(3)
with open(out, "w") as f:
    f.write(os.path.abspath(src))
'''

FAKE_NIMBLE_RUN = r'''#!PYTHON
import json, os, re, signal, sys
import numpy as np
mode = os.environ.get("FAKE_MODE", "")
args = sys.argv[1:]
exe = args[0]
inputs = [args[i + 1] for i, a in enumerate(args) if a == "--input"]
outdir = args[args.index("--output-dir") + 1]
if mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
src = open(exe).read()
models_dir = os.path.dirname(src)
meta = json.load(open(src[:-len(".onnx")] + ".json"))
# The case this run is for: the folder of its first input file.
case_id = int(os.path.basename(os.path.dirname(inputs[0].split("=", 1)[1])))
case = meta["cases"][case_id]
spoiled = False
for i, o in enumerate(meta["outputs"]):
    a = np.load(os.path.join(models_dir, case["outputs"][o["name"]]["file"]))
    if not spoiled and a.size:
        if mode == "float_off" and a.dtype == np.float32:
            a = a.copy(); a.flat[a.size // 2] = a.flat[a.size // 2] * np.float32(1.001) + np.float32(1e-3)
            spoiled = True
        elif mode == "nan" and a.dtype == np.float32:
            a = a.copy(); a.flat[0] = np.nan; spoiled = True
        elif mode == "int_off" and a.dtype == np.int64:
            a = a.copy(); a.flat[-1] += 1; spoiled = True
        elif mode == "bool_as_uint8" and a.dtype == np.bool_:
            a = a.astype(np.uint8); spoiled = True
        elif mode == "wrong_shape" and a.ndim >= 1:
            a = a.reshape(-1)[:-1]; spoiled = True
        elif mode == "missing" and i == len(meta["outputs"]) - 1:
            continue
    if mode == "unnamed":
        fname = "output_%d" % i
    else:
        fname = re.sub(r"[^A-Za-z0-9._-]", "_", o["name"])
    path = os.path.join(outdir, fname + ".npy")
    np.save(path, a)
    print("%s: %s %s -> %s" % (o["name"], a.dtype, list(a.shape), path))
'''


def write_tool(path, text):
    with open(path, "w") as f:
        f.write(text.replace("#!PYTHON", "#!" + sys.executable, 1))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def main(argv):
    if len(argv) != 2:
        print("usage: check_runner.py MODELS_DIR WORK_DIR", file=sys.stderr)
        return 2
    corpus, work = (os.path.abspath(a) for a in argv)
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    model = "mean_pool"  # float32, int64 and bool outputs; names that are not file-name-safe
    # A corpus of that one model, so that a run without --only stays short.
    models_dir = os.path.join(work, "corpus")
    os.makedirs(models_dir)
    shutil.copy(os.path.join(corpus, model + ".onnx"), models_dir)
    with open(os.path.join(corpus, model + ".json")) as f:
        meta = json.load(f)
    meta["cases"] = meta["cases"][:2]  # two cases are enough, and each run of a fake tool loads numpy
    with open(os.path.join(models_dir, model + ".json"), "w") as f:
        json.dump(meta, f)
    for case in meta["cases"]:
        shutil.copytree(os.path.join(corpus, model + ".ref", str(case["id"])),
                        os.path.join(models_dir, model + ".ref", str(case["id"])))
    nimble = os.path.join(work, "fake-nimble")
    nimble_run = os.path.join(work, "fake-nimble-run")
    write_tool(nimble, FAKE_NIMBLE)
    write_tool(nimble_run, FAKE_NIMBLE_RUN)
    lists = {}
    for key, text in (("empty", "# nothing is known to fail\n"),
                      ("mean_pool", "# comment\nmean_pool bool inputs are read as uint1\n"),
                      ("aarch64_only", "mean_pool@aarch64 only on aarch64\n"),
                      ("stale", "no_such_model it was removed\n"),
                      ("bad_target", "mean_pool@riscv what\n")):
        lists[key] = os.path.join(work, key + ".txt")
        with open(lists[key], "w") as f:
            f.write(text)

    failures = []

    def expect(label, mode, known, rc_want, must, extra=(), target="x86", only=model):
        env = dict(os.environ, FAKE_MODE=mode)
        argv = [sys.executable, RUNNER, "--models-dir", models_dir, "--nimble", nimble,
                "--nimble-run", nimble_run, "--known-failures", lists[known], "--target", target,
                "--work-dir", os.path.join(work, "run-" + label)] + (["--only", only] if only else []) + list(extra)
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=600)
        out = p.stdout.decode("utf-8", "replace")
        problems = []
        if p.returncode != rc_want:
            problems.append("exit %d, expected %d" % (p.returncode, rc_want))
        for s in must:
            if s not in out:
                problems.append("output lacks %r" % s)
        if problems:
            failures.append("%s: %s\n--- runner output ---\n%s" % (label, "; ".join(problems), out))
            print("FAIL %s: %s" % (label, "; ".join(problems)))
        else:
            print("ok   %s" % label)
        return out

    expect("exact outputs pass", "exact", "empty", 0, ["mean_pool: pass", "case 1 (B=3 S=7 lengths 5,2,7): pass"])
    expect("output_<i> file names are found", "unnamed", "empty", 0, ["mean_pool: pass"])
    expect("a float off by 0.1% fails", "float_off", "empty", 1,
           ["mean_pool: FAIL: case 0: output 'sentence_embedding': 1 of 24 values out of tolerance"])
    expect("a NaN fails", "nan", "empty", 1, ["output 'sentence_embedding': NaN at 1 positions, expected 0"])
    expect("an int64 off by one fails", "int_off", "empty", 1,
           ["output 'tokens/count:0': 1 of 1 values differ; first at [0]: 2, expected 1"])
    expect("a bool output as uint8 fails", "bool_as_uint8", "empty", 1,
           ["output '{\"output\": \"keep\", \"dtype\": \"bool\"}': dtype uint8, expected bool"])
    expect("a wrong shape fails", "wrong_shape", "empty", 1,
           ["case 1 (B=3 S=7 lengths 5,2,7): FAIL: output 'sentence_embedding': shape [71], expected [3, 24]"])
    expect("a missing output fails", "missing", "empty", 1,
           ["nimble-run wrote no __output____keep____dtype____bool__.npy (nor output_2.npy)"])
    expect("a crash is named", "crash", "empty", 1, ["case 0: run: killed by SIGSEGV"])
    expect("a compile error's first line is reported", "compile_error", "empty", 1,
           ["mean_pool: FAIL: compile: exit 3: nimble: compiling mean_pool.onnx (import): node 'x' (Mystery): "
            "operator 'Mystery' is not supported  ["])
    out = expect("a listed model may fail", "int_off", "mean_pool", 0,
                 ["mean_pool: known failure: case 0: output 'tokens/count:0'"])
    if "second line" in out:
        failures.append("only the first line of an error is reported")
    expect("a listed model that passes fails the run", "exact", "mean_pool", 1,
           ["mean_pool: UNEXPECTED PASS: listed in mean_pool.txt (bool inputs are read as uint1); "
            "remove it from the list"])
    expect("an entry for aarch64 does not excuse x86", "int_off", "aarch64_only", 1, ["mean_pool: FAIL:"])
    expect("an entry for aarch64 excuses aarch64", "int_off", "aarch64_only", 0,
           ["mean_pool: known failure:"], target="aarch64", extra=["--emulator", ""])
    expect("a stale entry fails the run", "exact", "stale", 1,
           ["STALE:", "names 'no_such_model', which the corpus does not have"], only="")
    expect("an unknown target in the list is a usage error", "exact", "bad_target", 2,
           ["the target after '@' must be x86 or aarch64"])
    expect("aarch64 without an aarch64 nimble-run is skipped", "exact", "empty", 77,
           ["skipped: no aarch64 nimble-run"], target="aarch64", extra=["--nimble-run", ""])
    if failures:
        print("\n%d check(s) failed:\n\n%s" % (len(failures), "\n\n".join(failures)))
        return 1
    print("check_runner: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
