#!/usr/bin/python3
"""`nimble profile` end to end on loopback with the reference MLP
(784-512-512-10, dynamic batch) and the real compiler: the model is
compiled by the farm, then profiled as PROFILE jobs on the worker, and the
reports are checked against things known without the profiler:

  * every kernel's calls = its InvokePacked instructions in the artifact's
    disassembly (`nimble inspect`; the MLP has no control flow) x runs;
  * the peak memory grows by exactly 2 x 512 x 4 bytes per row of the batch
    (the two hidden activations, float32, live at once), from batch 4 to 16;
  * the farm's report for an artifact equals, in peak bytes and kernel
    calls, a local `nimble profile` of the same artifact fetched here;
  * min <= median <= max, and the kernels' time fits in the runs' time;
  * a wrong input name fails the job with the runtime's message; a target
    no worker can run waits, and the client says so.

Then the scheduler's and the worker's metrics count those jobs.

    test_profile.py BUILD_DIR MODELS_DIR
"""

import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from farm import Farm, http_get  # noqa: E402
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("FAIL: the Prometheus client library is missing: install python3-prometheus-client "
             "(scripts/setup.sh does)")

FAILED = []
RUNS = 10


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILED.append(what)


def metrics(url):
    _, _, text = http_get(url + "/metrics")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def profile_json(farm, *args):
    out = farm.nimble("profile", *args, "--json")
    return json.loads(out.stdout)


def main():
    build, models = sys.argv[1], sys.argv[2]
    mlp = os.path.join(models, "mlp.onnx")
    nimble = os.path.join(build, "client", "nimble")
    farm = Farm(build, compiler=nimble, name="profile").start()
    try:
        # One worker that compiles for x86 and aarch64 but can only run x86
        # code: profiles for aarch64 are not its to take.
        # No address-space limit: in the sanitizer build the compiler and the
        # profiler carry AddressSanitizer's shadow memory (far over 8 GiB).
        wurl = farm.start_worker("w-x86", "x86,aarch64", extra=("--mem-limit-mb", "0"))
        out = farm.nimble("submit", mlp, "--targets=x86", "--name", "team/mlp", "--timeout", "300")
        m = re.search(r"team/mlp:x86@(sha256:[0-9a-f]{64})", out.stdout)
        check(m is not None, "the farm compiled the MLP for x86")
        manifest = m.group(1)

        small = profile_json(farm, "team/mlp", "--target=x86", "--input", "x=4x784", "--runs", str(RUNS))
        big = profile_json(farm, f"team/mlp@{manifest}", "--target=x86", "--input", "x=16x784",
                           "--runs", str(RUNS))
        r = small["report"]
        check(small["manifest"] == manifest and big["manifest"] == manifest,
              "both reports are of the manifest the submit printed (by tag, then pinned)")
        check(r["runs"] == RUNS and 0 < r["min_ns"] <= r["median_ns"] <= r["max_ns"],
              f"latency: min {r['min_ns']} <= median {r['median_ns']} <= max {r['max_ns']} ns over {r['runs']} runs")
        check(r["entry"] == "main" and r["threads"] == 1, "entry main, one thread")

        with tempfile.TemporaryDirectory() as tmp:
            exe = os.path.join(tmp, "mlp-x86.nimble")
            farm.nimble("fetch", "team/mlp", "--target=x86", "-o", exe)
            dis = farm.nimble("inspect", exe).stdout
            local = json.loads(farm.nimble("profile", exe, "--input", "x=4x784", "--runs", str(RUNS),
                                           "--json").stdout)
            # bert_tiny's fused kernels have names past 40 characters that
            # differ only at the end: the text table tells every one apart
            # and gives each the calls its JSON report counts.
            bexe = os.path.join(tmp, "bert_tiny.nimble")
            farm.nimble("compile", os.path.join(models, "bert_tiny.onnx"), "-o", bexe)
            bargs = (bexe, "--input", "x=1x16x128", "--runs", "1")
            bjson = json.loads(farm.nimble("profile", *bargs, "--json").stdout)
            btext = farm.nimble("profile", *bargs).stdout.splitlines()
            rows = {}
            for line in btext[btext.index(next(l for l in btext if l.startswith("kernel "))) + 1:]:
                cols = line.split()
                rows[cols[0]] = int(cols[1])
            want = {k["symbol"]: k["calls"] for k in bjson["kernels"] if k["calls"]}
            check(max(len(sym) for sym in want) > 40 and rows == want,
                  f"bert_tiny's text table names each of its {len(want)} kernels whole, with its calls "
                  f"({len(rows)} rows; longest name {max(len(sym) for sym in want)})")
            # The command line's own errors, here.
            for args, code, text in [
                ((exe,), 2, "no --input NAME=DIMS given"),
                ((exe, "--input", "x=4x-1"), 2, "'-1' is not a dimension"),
                ((exe, "--input", "x=4x784", "--input", "x=2x784"), 2, "--input 'x' is given twice"),
                ((exe, "--input", "x=4x784", "--runs", "0"), 2, "--runs '0': expected an integer from 1"),
                ((exe, "--input", "x=4x784x2"), 1, "input 'x' has shape [4,784,2], expected [?batch,784]"),
                ((exe, "--input", "z=1"), 1, "entry 'main' has no such input (its inputs: x)"),
                ((os.path.join(tmp, "missing.nimble"), "--input", "x=1x784"), 3, "missing.nimble"),
            ]:
                res = farm.nimble("profile", *args, check=False)
                check(res.returncode == code and text in res.stderr,
                      f"nimble profile {' '.join(os.path.basename(a) for a in args)}: exit {res.returncode}, "
                      f"{res.stderr.strip().splitlines()[-1] if res.stderr.strip() else ''!r}")
        invokes = {}
        for sym in re.findall(r"InvokePacked\s+kernel=#\d+ (\S+)", dis):
            invokes[sym] = invokes.get(sym, 0) + 1
        calls = {k["symbol"]: k["calls"] for k in r["kernels"]}
        check(invokes and calls == {s: n * RUNS for s, n in invokes.items()},
              f"kernel calls = InvokePacked in the disassembly x {RUNS}: {calls}")
        check({k["symbol"]: k["calls"] for k in big["report"]["kernels"]} == calls,
              "the same calls at batch 16 (no control flow)")
        dense = [k for k in r["kernels"] if k["symbol"].endswith("dense_relu")]
        check(dense and all(k["total_ns"] > 0 for k in dense), "the dense kernels took time")
        # The kernel pass is a second set of runs, so only the order of
        # magnitude can be held to: a unit slip (us for ns) is 1000x.
        kernel_ns = sum(k["total_ns"] for k in r["kernels"])
        check(RUNS * r["min_ns"] / 10 <= kernel_ns <= 10 * RUNS * r["max_ns"],
              f"the kernels' {kernel_ns} ns are within 10x of {RUNS} runs of {r['min_ns']}..{r['max_ns']} ns")
        grow = big["report"]["peak_bytes"] - r["peak_bytes"]
        check(grow == 2 * 512 * 4 * (16 - 4),
              f"peak memory grows {grow} bytes from batch 4 to 16: 2 live 512-wide float32 rows each")
        check(local["peak_bytes"] == r["peak_bytes"] and
              {k["symbol"]: k["calls"] for k in local["kernels"]} == calls,
              f"a local profile of the fetched artifact agrees (peak {local['peak_bytes']} bytes)")

        text = farm.nimble("profile", "team/mlp", "--target=x86", "--input", "x=2x784", "--runs", "3")
        check("median" in text.stdout and "nimble_k_fused_dense_relu" in text.stdout and
              "peak memory" in text.stdout, "the text report names the latency, memory and kernels")

        bad = farm.nimble("profile", "team/mlp", "--target=x86", "--input", "y=4x784", check=False)
        check(bad.returncode == 1 and "entry 'main' has no such input (its inputs: x)" in bad.stderr,
              f"a wrong input name fails the job with the reason (exit {bad.returncode}): "
              f"{bad.stderr.strip().splitlines()[-1] if bad.stderr.strip() else ''}")
        wait = farm.nimble("profile", "team/mlp", "--target=aarch64", "--input", "x=4x784", "--timeout", "3",
                           check=False)
        check(wait.returncode == 5 and "no connected worker can run this target" in wait.stderr,
              f"an aarch64 profile waits for a worker that can run it (exit {wait.returncode})")
        usage = farm.nimble("profile", "team/mlp:x86", "--target=x86", "--input", "x=4x784", check=False)
        check(usage.returncode == 2 and "the tag comes from --target" in usage.stderr, "NAME:TAG is a usage error")

        s = metrics(farm.scheduler_http)
        get = lambda n, **l: s.get((n, tuple(sorted(l.items()))), 0.0)
        check(get("nimble_scheduler_jobs_total", kind="profile", state="done") == 3 and
              get("nimble_scheduler_jobs_total", kind="profile", state="failed") == 1,
              "the scheduler counted 3 profile jobs done, 1 failed")
        check(get("nimble_scheduler_queue_length", kind="profile", target="aarch64") == 1,
              "the aarch64 profile still waits in its queue")
        check(get("nimble_scheduler_requests_total", type="PROFILE") == 5, "5 PROFILE requests")
        w = metrics(wurl)
        wget = lambda n, **l: w.get((n, tuple(sorted(l.items()))), 0.0)
        check(wget("nimble_worker_profiles_total", target="x86") == 4 and
              wget("nimble_worker_profile_failures_total", target="x86") == 1 and
              wget("nimble_worker_profile_seconds_count", target="x86") == 4,
              "the worker counted 4 profiles, 1 failed, 4 durations")
        check(wget("nimble_worker_compiles_total", target="x86") == 1, "and 1 compile")
    except BaseException:
        farm.kill()
        raise
    farm.stop()
    if FAILED:
        print(f"{len(FAILED)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()
