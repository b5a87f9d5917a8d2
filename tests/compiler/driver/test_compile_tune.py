#!/usr/bin/python3
"""`nimble compile --option tune=true` end to end, as a user runs it: the
reference CNN (PyTorch's outputs in cnn.ref) compiled untuned and tuned on
this machine, both run by nimble-run.

  * the tuned executable's outputs are the untuned one's, bit for bit, and
    match PyTorch (records change speed, never results);
  * the records file is the documented format, one record per kernel
    measured, for this target at the threads asked for;
  * compiling again with those records measures nothing and rebuilds the
    same bytes; records forcing another schedule change the kernels' code
    (different bytes) but not one output bit; records of another CPU are
    not applied;
  * a model tuned at two input sizes (bert_tiny, seq 16 and 64) gives the
    untuned bits at other sizes, and a second model with the same kernels
    (bert_tiny_emb after bert_tiny) measures only its own; its records'
    size buckets lie between the two sizes, and records forcing three
    schedules by size on every kernel give the untuned bits at lengths in
    each of them;
  * a budget that runs out before the schedule points are compiled
    records only the kernels it measured, and says so;
  * the AVX-512 clone choice (x86): records saying "yes" clone every
    kernel whose vector loops carry no reduction, records saying "no"
    take the lstm's gates' clone away; neither changes an output bit; nor
    do records choosing 4 or 16 vector lanes or an interleave count;
  * misuse is refused by name: records without tune=true, a malformed
    records file (the record and field named), and a target this machine
    cannot run is compiled without measuring, saying why.

    test_compile_tune.py BUILD_DIR MODELS_DIR
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

BUILD, MODELS = sys.argv[1], sys.argv[2]
NIMBLE = os.path.join(BUILD, "client", "nimble")
RUN = os.path.join(BUILD, "runtime", "tools", "nimble-run")
FAILED = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def sh(*args, expect=0):
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=600)
    if p.returncode != expect:
        print(p.stderr)
    check(p.returncode == expect, "exit %d (want %d): %s" % (p.returncode, expect, " ".join(args[1:4])))
    return p.stderr


def compile_(out, *extra, expect=0):
    return sh(NIMBLE, "compile", os.path.join(MODELS, "cnn.onnx"), "-o", out, "--no-kernel-cache", *extra,
              expect=expect)


def run(exe, tmp, case):
    od = os.path.join(tmp, "out-" + os.path.basename(exe))
    os.makedirs(od, exist_ok=True)
    x = os.path.join(MODELS, "cnn.ref", str(case), "x.npy")
    sh(RUN, exe, "--input", "x=" + x, "--output-dir", od)
    return np.load(os.path.join(od, "y.npy"))


def bert_like_plain(tmp, plain, other, cases, what):
    """bert_tiny's reference cases through nimble-run: `other` gives
    `plain`'s bits, and both PyTorch's values."""
    for case in cases:
        x = os.path.join(MODELS, "bert_tiny.ref", str(case), "x.npy")
        got = []
        for exe in (plain, other):
            od = os.path.join(tmp, "bout-%s-%d" % (os.path.basename(exe), case))
            os.makedirs(od, exist_ok=True)
            sh(RUN, exe, "--input", "x=" + x, "--output-dir", od)
            got.append(np.load(os.path.join(od, "y.npy")))
        want = np.load(os.path.join(MODELS, "bert_tiny.ref", str(case), "y.npy"))
        check(got[0].tobytes() == got[1].tobytes() and np.allclose(got[1], want, rtol=1e-4, atol=1e-5),
              "bert_tiny case %d: %s, the untuned bits and PyTorch's values" % (case, what))


def host_v4():
    """Whether this CPU runs x86-64-v4 code (the runtime's clone choice)."""
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return all(f in flags.split() for f in ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"))


def read(p):
    with open(p, "rb") as f:
        return f.read()


def main():
    tmp = tempfile.mkdtemp(prefix="nimble-tune-")
    plain, tuned = os.path.join(tmp, "plain.nimble"), os.path.join(tmp, "tuned.nimble")
    rec = os.path.join(tmp, "records.json")
    t0 = time.monotonic()
    compile_(plain)
    # The budgets scale with this machine's speed now (a sanitized build, a
    # loaded machine): half a budget compiles the schedule points, and one
    # point costs about this plain compile. 16 s fits the 13 points where a
    # plain compile takes 0.5 s.
    scale = max(1.0, (time.monotonic() - t0) / 0.5)
    budget = lambda s: "tune_budget_s=%d" % math.ceil(s * scale)
    tune = ["--option", "tune=true", "--option", "tune_threads=2", "--option", budget(16),
            "--option", "tune_inputs=x=1x3x32x32"]
    err = compile_(tuned, *tune, "--tune-records-out", rec)
    check("tuned: 9 kernels, 0 with records given, 9 new records" in err, "the tune summary is printed: " + err.strip().splitlines()[-1])

    doc = json.load(open(rec))
    records = doc["records"]
    check(doc["format"] == "nimble.tune-records.v1", "records file format")
    check(len(records) == 9, "a record for each of the CNN's 9 kernels: %d" % len(records))
    check(sum(r["default_us"] > 0 for r in records) >= 5, "most of them timed")
    check(all(r["target"] == "x86" and r["threads"] == 2 and r["default_us"] > 0 and r["tuned_us"] > 0
              and r["tuned_us"] <= r["default_us"] and len(r["signature"]) == 64 and "/" in r["cpu"]
              for r in records), "every record is for x86 at 2 threads, timed, tuned <= default")

    for case in (0, 1):
        want = np.load(os.path.join(MODELS, "cnn.ref", str(case), "y.npy"))
        a, b = run(plain, tmp, case), run(tuned, tmp, case)
        check(a.tobytes() == b.tobytes(), "case %d: tuned outputs = untuned outputs, bit for bit" % case)
        check(np.allclose(b, want, rtol=1e-4, atol=1e-5), "case %d: tuned outputs match PyTorch" % case)

    # Records reproduce the build and stop the search.
    again = os.path.join(tmp, "again.nimble")
    err = compile_(again, *tune, "--tune-records", rec, "--tune-records-out", os.path.join(tmp, "none.json"))
    check(" 0 new records (1 points compiled" in err and "%d with records given" % len(records) in err,
          "nothing compiled or measured again: " +
          err.strip().splitlines()[-1])
    check(read(again) == read(tuned), "the same records build the same bytes")
    check(json.load(open(os.path.join(tmp, "none.json")))["records"] == [], "no new records written")

    # Records forcing a schedule: other code, the same bits.
    forced = dict(doc)
    forced["records"] = [dict(r, schedule={"parallel": False, "min_task_work": 65536, "conv_block": 16384})
                         for r in records]
    frec = os.path.join(tmp, "forced.json")
    json.dump(forced, open(frec, "w"))
    fexe = os.path.join(tmp, "forced.nimble")
    compile_(fexe, *tune, "--tune-records", frec)
    check(read(fexe) != read(plain), "records forcing a schedule change the kernels' code")
    for case in (0, 1):
        check(run(fexe, tmp, case).tobytes() == run(plain, tmp, case).tobytes(),
              "case %d: forced schedules give the untuned outputs bit for bit" % case)

    # The AVX-512 clone choice: "yes" clones the CNN's kernels with vector
    # loops (none has exp, tanh, sigmoid or erf, so the plain build has no
    # clone); where this CPU runs them, the outputs are still the plain
    # build's bits.
    clone_re = re.compile(rb"nimble_k_[a-z0-9_]+__avx512")
    check(not clone_re.search(read(plain)), "the plain CNN has no AVX-512 clone")
    yes = dict(doc)
    yes["records"] = [dict(r, schedule=dict(r["schedule"], avx512_clone="yes")) for r in records]
    yrec, yexe = os.path.join(tmp, "yes.json"), os.path.join(tmp, "yes.nimble")
    json.dump(yes, open(yrec, "w"))
    compile_(yexe, *tune, "--tune-records", yrec)
    cloned = sorted(set(m.decode() for m in clone_re.findall(read(yexe))))
    check(len(cloned) >= 3 and any("max_pool" in c for c in cloned),
          "records saying avx512_clone=yes clone the CNN's vectorized kernels: %s" % cloned)
    if not host_v4():
        print("skipped: running the clones (this CPU has no x86-64-v4); the AVX2 kernels ran")
    for case in (0, 1):
        check(run(yexe, tmp, case).tobytes() == run(plain, tmp, case).tobytes(),
              "case %d: the clones give the untuned outputs bit for bit" % case)
    # Another vector width (4 lanes, 16 lanes as two AVX2 registers): other
    # code, the same bits (the CNN's kernels have no vectorized reduction).
    # So do LLVM's interleave counts pinned to 1 or 4.
    for knob, value in (("vector_width", 4), ("vector_width", 16), ("interleave", 1), ("interleave", 4)):
        wdoc = dict(doc)
        wdoc["records"] = [dict(r, schedule=dict(r["schedule"], **{knob: value})) for r in records]
        wrec, wexe = os.path.join(tmp, "%s%d.json" % (knob, value)), os.path.join(tmp, "%s%d.nimble" % (knob, value))
        json.dump(wdoc, open(wrec, "w"))
        compile_(wexe, *tune, "--tune-records", wrec)
        check(read(wexe) != read(plain), "records saying %s=%d change the kernels' code" % (knob, value))
        for case in (0, 1):
            check(run(wexe, tmp, case).tobytes() == run(plain, tmp, case).tobytes(),
                  "case %d: %s=%d gives the untuned outputs bit for bit" % (case, knob, value))
    # "no" on the lstm: its gates' clone (built by default: sigmoid, tanh)
    # goes, and the outputs are the AVX2 kernels' bits (NIMBLE_AVX512=0).
    lplain, lrec = os.path.join(tmp, "lstm.nimble"), os.path.join(tmp, "lstm.json")
    sh(NIMBLE, "compile", os.path.join(MODELS, "lstm.onnx"), "-o", lplain, "--no-kernel-cache")
    check(clone_re.search(read(lplain)) is not None, "the plain lstm clones its gates")
    sh(NIMBLE, "compile", os.path.join(MODELS, "lstm.onnx"), "-o", os.path.join(tmp, "lstm-t.nimble"),
       "--no-kernel-cache", "--option", "tune=true", "--option", budget(4), "--option", "tune_threads=2",
       "--option", "tune_inputs=x=8x1x128", "--tune-records-out", lrec)
    ldoc = json.load(open(lrec))
    ldoc["records"] = [dict(r, schedule=dict(r["schedule"], avx512_clone="no")) for r in ldoc["records"]]
    json.dump(ldoc, open(lrec, "w"))
    lno = os.path.join(tmp, "lstm-no.nimble")
    sh(NIMBLE, "compile", os.path.join(MODELS, "lstm.onnx"), "-o", lno, "--no-kernel-cache", "--option",
       "tune=true", "--option", budget(4), "--option", "tune_inputs=x=8x1x128", "--tune-records", lrec)
    check(ldoc["records"] and clone_re.search(read(lno)) is None, "records saying avx512_clone=no: no clone")
    for case in (0, 1):
        x = os.path.join(MODELS, "lstm.ref", str(case), "x.npy")
        outs = []
        for exe, env in ((lno, {}), (lplain, {"NIMBLE_AVX512": "0"})):
            od = os.path.join(tmp, "lout-%s-%d" % (os.path.basename(exe), case))
            os.makedirs(od, exist_ok=True)
            p = subprocess.run([RUN, exe, "--input", "x=" + x, "--output-dir", od], capture_output=True, text=True,
                               timeout=600, env=dict(os.environ, **env))
            check(p.returncode == 0, "nimble-run %s: %s" % (os.path.basename(exe), p.stderr.strip()))
            outs.append(np.load(os.path.join(od, "y.npy")))
        want = np.load(os.path.join(MODELS, "lstm.ref", str(case), "y.npy"))
        check(outs[0].tobytes() == outs[1].tobytes() and np.allclose(outs[0], want, rtol=1e-4, atol=1e-5),
              "case %d: the lstm without its clone gives the AVX2 kernels' bits, and PyTorch's values" % case)

    # Another CPU's records are not applied.
    other = dict(forced)
    other["records"] = [dict(r, cpu="elsewhere/00000000") for r in forced["records"]]
    orec = os.path.join(tmp, "other.json")
    json.dump(other, open(orec, "w"))
    err = compile_(os.path.join(tmp, "other.nimble"), *tune, "--tune-records", orec)
    check(" 0 with records given" in err, "records of another CPU are not applied")
    check(json.load(open(rec))["records"] and read(os.path.join(tmp, "other.nimble")) != read(fexe),
          "and the forced schedules are not built")

    # A second model with the same kernels reuses the records: bert_tiny's
    # encoder, tuned, serves bert_tiny_emb (the same encoder after an
    # embedding) without measuring those kernels again.
    # bert_tiny is tuned at two sequence lengths at once (one schedule per
    # kernel, the best over both); its outputs at other lengths are the
    # untuned build's bits.
    brec_out = os.path.join(tmp, "bert.json")
    bplain, btuned = os.path.join(tmp, "bert-plain.nimble"), os.path.join(tmp, "bert.nimble")
    sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny.onnx"), "-o", bplain, "--no-kernel-cache")
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny.onnx"), "-o", btuned, "--no-kernel-cache", "--option",
             "tune=true", "--option", budget(8), "--option", "tune_threads=2", "--option",
             "tune_inputs=x=1x16x128|x=1x64x128", "--tune-records-out", brec_out)
    check("rounds at 2 input sizes" in err, "two sizes measured: " + err.strip().splitlines()[-1])
    nbert = len(json.load(open(brec_out))["records"])
    check(nbert > 0, "bert_tiny's kernels measured: %d records" % nbert)
    bert_like_plain(tmp, bplain, btuned, (0, 1, 2), "tuned at two sizes")  # sequence lengths 1, 5, 16
    # Size buckets: a record tuned at two sizes holds at most one, its
    # bound between the kernel's outputs at seq 16 and 64 (x 128 or 512
    # or 16 x 16 ... elements: above 16 and below 64 * 512); the summary
    # counts those records.
    brecs = json.load(open(brec_out))["records"]
    bucketed = [r for r in brecs if r.get("buckets")]
    m = re.search(r"\((\d+) of them one per output size\)", err)
    check((int(m.group(1)) if m else 0) == len(bucketed),
          "the summary counts the %d records with size buckets" % len(bucketed))
    check(all(len(r["buckets"]) == 1 and 16 <= r["buckets"][0]["max_elements"] < 64 * 512 for r in bucketed),
          "each size bucket's bound lies between the two sizes: %s" %
          [r["buckets"][0]["max_elements"] for r in bucketed])
    # Records forcing three schedules by size on every kernel (buckets up
    # to 640 and 8192 output elements, other knobs past them): the
    # reference's lengths 1 to 128 fall in all three, and every output is
    # the untuned bits.
    knobs = [{"parallel": False, "min_task_work": 16384, "conv_block": 65536, "vector_width": 16, "interleave": 4},
             {"parallel": True, "min_task_work": 4096, "conv_block": 16384, "vector_width": 4},
             {"parallel": True, "min_task_work": 65536, "conv_block": 262144, "interleave": 1}]
    if host_v4():
        knobs[2]["avx512_clone"] = "yes"
    fb = {"format": "nimble.tune-records.v1",
          "records": [dict(r, schedule=knobs[2], buckets=[{"max_elements": 640, "schedule": knobs[0]},
                                                          {"max_elements": 8192, "schedule": knobs[1]}])
                      for r in brecs]}
    fbrec, bforced = os.path.join(tmp, "bert-buckets.json"), os.path.join(tmp, "bert-buckets.nimble")
    json.dump(fb, open(fbrec, "w"))
    # (A budget that ran out above left a few kernels without a record:
    # a second's budget measures none of them here.)
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny.onnx"), "-o", bforced, "--no-kernel-cache",
             "--option", "tune=true", "--option", "tune_budget_s=1", "--tune-records", fbrec)
    m = re.search(r"(\d+) with records given", err)
    check(m and int(m.group(1)) >= len(brecs) and read(bforced) != read(bplain),
          "forced size buckets build other kernels: " + err.strip().splitlines()[-1])
    bert_like_plain(tmp, bplain, bforced, range(5), "three schedules by size")  # lengths 1, 5, 16, 50, 128
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny.onnx"), "-o", os.path.join(tmp, "x.nimble"),
             "--option", "tune=true", "--option", "tune_inputs=x=1x16x128||x=1x64x128", expect=1)
    check("an empty size between '|'" in err, "an empty size is named: " + err.strip())
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny.onnx"), "-o", os.path.join(tmp, "x.nimble"),
             "--option", "tune=true", "--option", "tune_inputs=x=1x16x128|x=1x64x64", expect=1)
    check("size 2 of 2" in err and "dim 2 is 64, declared 128" in err, "a bad size is named: " + err.strip())
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "bert_tiny_emb.onnx"), "-o", os.path.join(tmp, "emb.nimble"),
             "--no-kernel-cache", "--option", "tune=true", "--option", budget(4), "--option",
             "tune_threads=2", "--option", "tune_inputs=ids=1x16", "--tune-records", brec_out)
    m = re.search(r"tuned: (\d+) kernels, (\d+) with records given", err)
    check(m and int(m.group(2)) >= nbert - 2 and int(m.group(2)) < int(m.group(1)),
          "bert_tiny_emb reuses bert_tiny's %d records: %s" % (nbert, m.group(0) if m else err.strip()))

    # Misuse.
    err = compile_(os.path.join(tmp, "x.nimble"), "--tune-records", rec, expect=2)
    check("--tune-records needs --option tune=true" in err, "records without tune=true: " + err.strip())
    bad = dict(doc)
    bad["records"] = [dict(records[0], schedule=dict(records[0]["schedule"], conv_block=0))]
    brec = os.path.join(tmp, "bad.json")
    json.dump(bad, open(brec, "w"))
    err = compile_(os.path.join(tmp, "x.nimble"), *tune, "--tune-records", brec, expect=3)
    check(brec in err and "record 0" in err and "conv_block" in err, "a bad record is named: " + err.strip())
    err = sh(NIMBLE, "compile", os.path.join(MODELS, "cnn.onnx"), "--target", "aarch64", "-o",
             os.path.join(tmp, "a64.nimble"), "--no-kernel-cache", *tune)
    check("does not run on this machine" in err, "aarch64 on this machine: " + err.strip().splitlines()[-1])
    # A budget spent before every schedule point compiled (here before the
    # first, on most machines) records only kernels it measured: a
    # default-schedule record would stop the search of a later compile with
    # time to do it. It says so.
    short = os.path.join(tmp, "short.json")
    err = compile_(os.path.join(tmp, "short.nimble"), "--option", "tune=true", "--option", "tune_budget_s=1",
                   "--option", "tune_inputs=x=1x3x32x32", "--tune-records-out", short)
    check("ran out with" in err and all(r["default_us"] > 0 for r in json.load(open(short))["records"]),
          "a budget that runs out first records only what it measured: " + err.strip().splitlines()[-1])
    err = compile_(os.path.join(tmp, "x.nimble"), "--option", "tune_budget_s=0", expect=2)
    check("tune_budget_s='0'" in err, "a zero budget is a usage error")

    if FAILED:
        print("%d checks failed" % len(FAILED))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
