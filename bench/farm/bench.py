#!/usr/bin/python3
"""The farm benchmark's measurements, against a farm that bench/farm/run.sh
has started (redis-server, nimble-store, nimble-scheduler, one nimble-worker
per target, all on loopback). Prints a Markdown report.

1. Cache hits: `nimble submit` of a model already compiled, one client at a
   time and C clients at once; submissions per second answered from the
   cache, and the latency of one (a whole CLI process: model digest, HEAD on
   the store, SUBMIT, reply).
2. Fan-out: the same model compiled cold (the scheduler's job-cache and
   kernel-cache entries deleted from Redis and the workers' kernel folder
   emptied first) and warm (only the job cache deleted) for each target
   alone, then for all targets in one job; the job's wall time against the
   slowest single target.
3. Start-up fetch: nimble-run started on a store reference with an empty
   cache (cold: manifest and blobs downloaded and verified), with the cache
   filled (warm: the manifest is checked against the store), and with the
   store stopped (offline: from the cache alone), next to nimble-run on the
   same parts in a local directory (`nimble fetch -o DIR`). Each is a whole nimble-run process running the model
   once on a batch-1 input, so the differences are the fetch.

Every timed command must succeed and say what it was asked (a cache hit must
report cached, a cold compile must not); otherwise the benchmark stops with
the command's output. Medians and minimums; the machine is shared.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor


def run(cmd, env=None, check=True):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    dt = time.perf_counter() - t0
    if check and p.returncode != 0:
        sys.exit(f"bench/farm: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout}{p.stderr}")
    return dt, p


def ms(x):
    return f"{x * 1e3:.1f}" if x < 10 else f"{x * 1e3:.0f}"


def s(x):
    return f"{x:.2f}"


class Farm:
    def __init__(self, a):
        self.a = a
        self.base = [a.nimble, "--scheduler", a.clients, "--store", a.store, "--token", a.token]

    def submit(self, targets, name, check=True):
        cmd = self.base + ["submit", self.a.model, f"--targets={','.join(targets)}", "--name", name,
                           "--json", "--timeout", "900"]
        dt, p = run(cmd, check=False)
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            doc = None
        if check and (p.returncode != 0 or doc is None):
            sys.exit(f"bench/farm: submit {targets} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
        return dt, doc, p

    def drop_cache(self, kernels=False):
        """Deletes the scheduler's compile-cache entries, so the next submit
        compiles again (the artifacts stay in the store); with kernels, also
        the farm's kernel-cache index and the workers' kernel folder, so that
        it compiles every kernel (cold)."""
        rc = ["redis-cli", "-p", str(self.a.redis_port)]
        patterns = ["nimble:cache:*"] + (["nimble:kcache:*"] if kernels else [])
        for pattern in patterns:
            _, p = run(rc + ["--scan", "--pattern", pattern])
            keys = p.stdout.split()
            if keys:
                run(rc + ["del"] + keys)
        if kernels:
            shutil.rmtree(self.a.kcache_dir, ignore_errors=True)


def cache_hits(farm, a, targets, out):
    name = "bench/hits"
    farm.submit(targets, name)  # compiles, or is already cached
    lat = []
    for _ in range(a.submits):
        dt, doc, _ = farm.submit(targets, name)
        if not doc["cached"]:
            sys.exit("bench/farm: a resubmission was not answered from the cache")
        lat.append(dt)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(a.clients_n) as ex:
        res = list(ex.map(lambda _: farm.submit(targets, name), range(a.submits)))
    wall = time.perf_counter() - t0
    if not all(r[1]["cached"] for r in res):
        sys.exit("bench/farm: a concurrent resubmission was not answered from the cache")
    out.append("## 1. Submissions answered from the cache\n")
    out.append(f"`nimble submit {os.path.basename(a.model)} --targets={','.join(targets)}` of a model "
               f"already compiled; each submission is a whole `nimble` process.\n")
    out.append("| clients | submissions | per second | latency median (ms) | latency min (ms) |")
    out.append("|---:|---:|---:|---:|---:|")
    out.append(f"| 1 | {a.submits} | {1 / statistics.median(lat):.1f} | {ms(statistics.median(lat))} | "
               f"{ms(min(lat))} |")
    clat = [r[0] for r in res]
    out.append(f"| {a.clients_n} | {a.submits} | {a.submits / wall:.1f} | {ms(statistics.median(clat))} | "
               f"{ms(min(clat))} |")
    out.append("")


def fan_out(farm, a, targets, out):
    singles = {t: [] for t in targets}
    together = []
    warm = {t: [] for t in targets + ["all"]}

    def compile_once(ts, kernels):
        farm.drop_cache(kernels=kernels)
        dt, doc, _ = farm.submit(ts, "bench/fanout")
        if doc["cached"]:
            sys.exit("bench/farm: a compile was answered from the job cache")
        return dt

    for rep in range(a.reps):
        order = targets[rep % len(targets):] + targets[:rep % len(targets)]
        for t in order:
            singles[t].append(compile_once([t], True))
            warm[t].append(compile_once([t], False))  # its kernels now cached
        together.append(compile_once(targets, True))
        warm["all"].append(compile_once(targets, False))
    slowest = max(statistics.median(v) for v in singles.values())
    out.append("## 2. Fan-out: one job for every target against the slowest single target\n")
    out.append(f"Compiles of `{os.path.basename(a.model)}`, {a.reps} repetitions, target order rotating; "
               f"wall time of `nimble submit --wait` in seconds. Cold: the job cache, the farm's "
               f"kernel-cache index and the workers' kernel folder emptied before each submit (every "
               f"kernel compiled); warm: only the job cache emptied (every kernel a cache hit). One "
               f"worker per target, all on this {os.cpu_count()}-core machine, so the compiles of one "
               f"job share its cores.\n")
    out.append("| submission | cold median (s) | cold min (s) | warm median (s) | warm min (s) |")
    out.append("|---|---:|---:|---:|---:|")
    for t in targets:
        out.append(f"| {t} alone | {s(statistics.median(singles[t]))} | {s(min(singles[t]))} | "
                   f"{s(statistics.median(warm[t]))} | {s(min(warm[t]))} |")
    out.append(f"| {','.join(targets)} in one job | {s(statistics.median(together))} | {s(min(together))} | "
               f"{s(statistics.median(warm['all']))} | {s(min(warm['all']))} |")
    out.append("")
    out.append(f"Fan-out / slowest single target (medians): **{statistics.median(together) / slowest:.2f}x**"
               f" (1.0 would be perfect overlap; the sum of the singles over the slowest is "
               f"{sum(statistics.median(v) for v in singles.values()) / slowest:.2f}x).\n")


def fetch(farm, a, out):
    name = "bench/fetch"
    _, doc, _ = farm.submit(["x86"], name)
    ref = doc["targets"][0]["reference"]
    work = a.work
    local = os.path.join(work, "fetch-local")  # nimble fetch writes a directory of parts
    run(farm.base + ["fetch", name, "--target=x86", "-o", local])
    outdir = os.path.join(work, "fetch-out")
    os.makedirs(outdir, exist_ok=True)
    env = dict(os.environ, NIMBLE_TOKEN=a.token)

    def nimble_run(src, cache):
        e = dict(env, NIMBLE_CACHE_DIR=cache)
        dt, _ = run([a.nimble_run, src, "--input", a.input, "--output-dir", outdir], env=e)
        return dt

    cache = os.path.join(work, "fetch-cache")
    t = {"file": [], "cold": [], "warm": [], "offline": []}
    for _ in range(a.reps):
        shutil.rmtree(cache, ignore_errors=True)
        t["file"].append(nimble_run(local, cache))
        shutil.rmtree(cache, ignore_errors=True)
        t["cold"].append(nimble_run(ref, cache))
        t["warm"].append(nimble_run(ref, cache))
    os.kill(a.store_pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(a.store_pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    for _ in range(a.reps):
        t["offline"].append(nimble_run(ref, cache))
    size = sum(os.path.getsize(os.path.join(local, f)) for f in os.listdir(local))
    out.append("## 3. Start-up fetch\n")
    out.append(f"`nimble-run {ref.split('@')[0]}@sha256:…` (x86, {size / 1e6:.1f} MB of parts), one run "
               f"of the model on `{os.path.basename(a.input)}`, whole process, {a.reps} repetitions.\n")
    out.append("| start | median (ms) | min (ms) | over a local file (median, ms) |")
    out.append("|---|---:|---:|---:|")
    base = statistics.median(t["file"])
    labels = {"file": "local parts directory (no fetch)", "cold": "store, empty cache (cold)",
              "warm": "store, cache filled (warm)", "offline": "store stopped, cache filled (offline)"}
    for k in ("file", "cold", "warm", "offline"):
        m = statistics.median(t[k])
        out.append(f"| {labels[k]} | {ms(m)} | {ms(min(t[k]))} | {'—' if k == 'file' else ms(m - base)} |")
    out.append("")


def main():
    p = argparse.ArgumentParser()
    for k in ("nimble", "nimble_run", "clients", "store", "token", "model", "input", "work", "command"):
        p.add_argument("--" + k.replace("_", "-"), required=True)
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--kcache-dir", required=True, help="the workers' kernel folder (emptied for cold compiles)")
    p.add_argument("--store-pid", type=int, required=True)
    p.add_argument("--targets", default="x86,aarch64,cuda")
    p.add_argument("--submits", type=int, default=40)
    p.add_argument("--clients-n", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    farm = Farm(a)

    # Which targets compile at all: a target whose first compile fails is
    # reported and left out of the timings (no number is made up for it).
    targets, notes = [], []
    for t in a.targets.split(","):
        _, doc, proc = farm.submit([t], "bench/probe", check=False)
        if proc.returncode == 0 and doc and doc["state"] == "done":
            targets.append(t)
        else:
            err = (doc["targets"][0].get("error") if doc else None) or proc.stderr.strip()
            notes.append(f"- `{t}`: left out, its compile failed: {err.splitlines()[0] if err else '?'}")
    if not targets:
        sys.exit("bench/farm: no target compiles:\n" + "\n".join(notes))

    load0 = os.getloadavg()
    out = [f"# Farm benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
           f"- command: `{a.command}`",
           f"- machine: {os.cpu_count()} cores; load average {' '.join(f'{x:.2f}' for x in load0)} at the start",
           f"- model: `{os.path.basename(a.model)}`; targets measured: {', '.join(targets)}"]
    out += notes
    out.append("")
    cache_hits(farm, a, targets, out)
    fan_out(farm, a, targets, out)
    fetch(farm, a, out)
    out.append(f"Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    print("\n".join(out))


if __name__ == "__main__":
    main()
